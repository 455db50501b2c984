"""How far a run has got: its attempts by status, and its evaluator's verdicts.

A live page asks for these every second, so each is one count over an index ((run, status) on
attempts, (run, profile, status) on verdicts) and never reads the attempts themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Sum

from evaluation.models import Verdict, VerdictStatus
from experiments.models import AttemptStatus, Run


@dataclass(frozen=True)
class RunProgress:
    total: int
    queued: int
    running: int
    completed: int
    failed: int
    cancelled: int

    @property
    def done(self) -> int:
        return self.completed + self.failed + self.cancelled

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100


def run_progress(run: Run) -> RunProgress:
    # GROUP BY status reads the (run, status) index alone; a COUNT ... FILTER per status
    # made Postgres read every attempt row instead.
    counts = dict(run.attempts.order_by().values_list("status").annotate(n=Count("*")))
    by_status = {status: counts.get(status, 0) for status in AttemptStatus.values}
    return RunProgress(total=sum(counts.values()), **by_status)


def calls_made_again(run: Run) -> int:
    """Provider calls the run paid for twice: sent again by a later claim because the worker
    that sent them first died (or froze past its lease) mid-call, before the answer reached
    the answer journal (experiments/answer_journal.py)."""
    return run.attempts.filter(repeat_calls__gt=0).aggregate(n=Sum("repeat_calls"))["n"] or 0


@dataclass(frozen=True)
class JudgingProgress:
    judged: int  # verdicts of the run's profile with a final state: judged, or an evaluator error
    answered: int  # the attempts to judge: every answered (completed) attempt of the run

    @property
    def finished(self) -> bool:
        return self.judged >= self.answered


FINAL_VERDICTS = (VerdictStatus.JUDGED, VerdictStatus.EVALUATOR_ERROR)


def judging_progress(run: Run, progress: RunProgress) -> JudgingProgress | None:
    """None when the run has no evaluator: nothing to wait for."""
    if run.evaluator_profile_id is None:
        return None
    judged = Verdict.objects.filter(run=run, profile_id=run.evaluator_profile_id, status__in=FINAL_VERDICTS).count()
    return JudgingProgress(judged=judged, answered=progress.completed)


def is_live(run: Run, progress: RunProgress, judging: JudgingProgress | None) -> bool:
    """Whether the run's page can still change: it is not finished, attempts a cancel left
    running are still answering, or verdicts are still to come."""
    return not run.is_finished or progress.running > 0 or (judging is not None and not judging.finished)
