"""Why a run stopped, for the top of its page: who cancelled it and when, the budget that
refused its calls, or the errors its attempts failed with, the most common first.

Read cheaply, since a live page asks on every poll: the failures are grouped from a sample
of at most ``FAILURES_READ`` of them (one short range of the (run, status) index, in no
particular order), the budget's refusal is one row of the failures' partial index, and the
counts come from the run bar's progress and the budget line, already read. The messages are
the attempts' own, redacted when they were recorded, as each attempt's page shows them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from experiments.budgets import BudgetStatus
from experiments.models import AttemptStatus, Run, RunStatus
from experiments.progress import RunProgress
from providers.errors import ErrorCategory

FAILURES_READ = 200
CAUSES_SHOWN = 3
MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Cause:
    count: int  # of the failures read
    category: str
    message: str


@dataclass(frozen=True)
class Stoppage:
    """What the banner says: a headline, then the errors behind it."""

    headline: str  # "" for a run that went on, short of the calls a budget refused
    causes: list[Cause] = field(default_factory=list)
    failed: int = 0  # the run's failed attempts
    read: int = 0  # how many of them the causes were counted from (all of them, or a sample)
    budget: str = ""  # the budget's refusal, when a budget stopped calls
    not_made: int = 0  # the calls a budget refused

    @property
    def sampled(self) -> bool:
        return self.read < self.failed


def why_stopped(run: Run, progress: RunProgress, budget: BudgetStatus) -> Stoppage | None:
    """None for a run that is going, or finished without being stopped or failing."""
    refusal = _budget_refusal(run) if budget.not_made else ""
    if run.status not in (RunStatus.FAILED, RunStatus.CANCELLED) and not refusal:
        return None
    if run.status not in (RunStatus.FAILED, RunStatus.CANCELLED):
        return Stoppage("", budget=refusal, not_made=budget.not_made)  # it went on, short of the calls refused
    causes, read = _causes(run, progress.failed)
    headline = _cancelled(run, progress) if run.status == RunStatus.CANCELLED else _failed(progress, causes, read)
    return Stoppage(headline, causes, progress.failed, read, refusal, budget.not_made)


def _cancelled(run: Run, progress: RunProgress) -> str:
    who = f" by {run.cancelled_by.email}" if run.cancelled_by_id and run.cancelled_by else ""
    when = f" at {_clock(run.finished_at)}" if run.finished_at else ""
    skipped = progress.cancelled
    left = f": {skipped} attempt{'s were' if skipped != 1 else ' was'} not made" if skipped else ""
    return f"Cancelled{who}{when}{left}"


def _failed(progress: RunProgress, causes: list[Cause], read: int) -> str:
    if progress.failed == progress.total and len(causes) == 1 and read == progress.failed:
        return f"Failed: all {progress.failed} attempts failed with the same error"
    return f"Failed: no attempt was answered; {progress.failed} of {progress.total} failed"


def _clock(at: datetime) -> str:
    """14:03 today, or 14:03 on 27 Nov 2026, in the site's time zone."""
    local, today = timezone.localtime(at), timezone.localdate()
    return f"{local:%H:%M}" if local.date() == today else f"{local:%H:%M} on {local.day} {local:%b %Y}"


def _causes(run: Run, failed: int) -> tuple[list[Cause], int]:
    """The most common (category, message) pairs among a bounded sample of the failures."""
    if not failed:
        return [], 0
    sample = list(
        run.attempts.filter(status=AttemptStatus.FAILED)
        .order_by()  # any rows: ordering them would sort every failure first
        .values_list("error_category", "error_message")[:FAILURES_READ]
    )
    counted = Counter((category, _short(message)) for category, message in sample)
    ordered = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    return [Cause(count, category, message) for (category, message), count in ordered[:CAUSES_SHOWN]], len(sample)


def _budget_refusal(run: Run) -> str:
    """One of the budget's refusals (they all name the same budget and limit)."""
    found = (
        run.attempts.filter(~Q(error_category=""), error_category=ErrorCategory.BUDGET_EXCEEDED)
        .order_by()  # any one: first() would order them by id
        .values_list("error_message", flat=True)[:1]
    )
    return _short(next(iter(found), ""))


def _short(message: str) -> str:
    flat = " ".join(message.split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"
