"""How far a run has got: its attempts by status, the calls it paid for twice, and its
evaluator's verdicts.

A live page and CI's API poll ask for these every second, so they read the run's counters row
(RunCounters, kept exact by triggers: experiments/run_counters.py): one row by key, whatever
the run's size. run_counters.counted() gives the same figures from the attempts themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from evaluation.models import VerdictStatus
from experiments.models import AttemptStatus, Run, RunCounters

FINAL_VERDICTS = (VerdictStatus.JUDGED, VerdictStatus.EVALUATOR_ERROR)


@dataclass(frozen=True)
class RunProgress:
    total: int
    queued: int
    running: int
    completed: int
    failed: int
    cancelled: int
    # Provider calls the run paid for twice: sent again by a later claim because the worker
    # that sent them first died (or froze past its lease) mid-call, before the answer reached
    # the answer journal (experiments/answer_journal.py).
    repeat_calls: int = 0
    judged: int = 0  # verdicts of the run's profile with a final state (see JudgingProgress)

    @property
    def done(self) -> int:
        return self.completed + self.failed + self.cancelled

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 100


def run_progress(run: Run) -> RunProgress:
    counters = _counters_of(run)
    by_status = {status: getattr(counters, status) for status in AttemptStatus.values}
    return RunProgress(
        total=sum(by_status.values()), repeat_calls=counters.repeat_calls, judged=counters.judged, **by_status
    )


def _counters_of(run: Run) -> RunCounters:
    """The counters read with the run (access_run joins them), or else read now, never kept on
    the instance: a command waiting for its run polls with the same one."""
    relation = Run.counters.related
    counters = (
        cast(RunCounters | None, relation.get_cached_value(run)) if relation.is_cached(run) else _read_counters(run)
    )
    return counters or RunCounters(run_id=run.pk)  # no row: no attempts yet


def _read_counters(run: Run) -> RunCounters | None:
    return RunCounters.objects.filter(run_id=run.pk).first()


@dataclass(frozen=True)
class JudgingProgress:
    judged: int  # verdicts of the run's profile with a final state: judged, or an evaluator error
    answered: int  # the attempts to judge: every answered (completed) attempt of the run

    @property
    def finished(self) -> bool:
        return self.judged >= self.answered


def judging_progress(run: Run, progress: RunProgress) -> JudgingProgress | None:
    """None when the run has no evaluator: nothing to wait for."""
    if run.evaluator_profile_id is None:
        return None
    return JudgingProgress(judged=progress.judged, answered=progress.completed)


def is_live(run: Run, progress: RunProgress, judging: JudgingProgress | None) -> bool:
    """Whether the run's page can still change: it is not finished, attempts a cancel left
    running are still answering, or verdicts are still to come."""
    return not run.is_finished or progress.running > 0 or (judging is not None and not judging.finished)
