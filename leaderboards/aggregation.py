"""Per-arm leaderboard rows, aggregated in SQL from whatever attempts are handed in."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum

from leaderboards.sql import Percentile
from leaderboards.stats import LOW_SAMPLE, wilson_interval

# Attempt statuses as plain strings: leaderboards take a queryset, not the experiments app.
COMPLETED, FAILED = "completed", "failed"


@dataclass(frozen=True)
class ArmRow:
    arm_id: int
    label: str
    provider: str
    model_name: str
    n: int  # attempts that finished (completed or failed); cancelled ones do not count
    resolved: int
    failed: int
    resolved_rate: float | None
    ci_low: float | None
    ci_high: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    cost_usd: Decimal | None  # None when any answered attempt's price is unknown
    cost_per_resolved_usd: Decimal | None
    error_rate: float | None

    @property
    def low_sample(self) -> bool:
        return self.n < LOW_SAMPLE


def arm_leaderboard(attempts: QuerySet) -> list[ArmRow]:
    """Rank arms by resolved rate, then by the interval's lower bound, then by cost."""
    rows = (
        attempts.values("arm_id", "arm__label", "arm__provider", "arm__model_name", "arm__position")
        .annotate(
            n=Count("id", filter=Q(status__in=(COMPLETED, FAILED))),
            resolved_count=Count("id", filter=Q(resolved=True)),
            failed_count=Count("id", filter=Q(status=FAILED)),
            p50=Percentile("latency_ms", 0.5),
            p95=Percentile("latency_ms", 0.95),
            cost=Sum("cost_usd"),
            unpriced=Count("id", filter=Q(status=COMPLETED, cost_usd__isnull=True)),
        )
        .order_by("arm__position", "arm_id")
    )
    board = [_row(values) for values in rows]
    return sorted(board, key=lambda r: (-(r.resolved_rate or 0), -(r.ci_low or 0), r.cost_usd or Decimal("Infinity")))


def _row(values: dict) -> ArmRow:
    n, resolved = values["n"], values["resolved_count"]
    interval = wilson_interval(resolved, n)
    cost = None if values["unpriced"] else (values["cost"] or Decimal(0))
    return ArmRow(
        arm_id=values["arm_id"],
        label=values["arm__label"],
        provider=values["arm__provider"],
        model_name=values["arm__model_name"],
        n=n,
        resolved=resolved,
        failed=values["failed_count"],
        resolved_rate=resolved / n if n else None,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        latency_p50_ms=values["p50"],
        latency_p95_ms=values["p95"],
        cost_usd=cost,
        cost_per_resolved_usd=(cost / resolved).quantize(Decimal("0.00000001"))
        if cost is not None and resolved
        else None,
        error_rate=values["failed_count"] / n if n else None,
    )
