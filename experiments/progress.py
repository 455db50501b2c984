from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

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
    counts = run.attempts.aggregate(
        total=Count("id"), **{status: Count("id", filter=Q(status=status)) for status in AttemptStatus.values}
    )
    return RunProgress(**counts)
