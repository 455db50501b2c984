"""Per-arm leaderboard rows, aggregated in SQL from whatever attempts are handed in."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Avg, Case, Count, F, Q, QuerySet, Sum, When

from leaderboards.sql import Percentile
from leaderboards.stats import LOW_SAMPLE, MIN_JUDGED, bootstrap_mean_interval, wilson_interval
from providers.outcomes import SCORED, OutcomeClass

# Attempt statuses as plain strings: leaderboards take a queryset, not the experiments app.
COMPLETED = "completed"
JUDGED, EVALUATOR_ERROR = "judged", "evaluator_error"  # verdict statuses, likewise
# An attempt that reused a cached answer made no call: it counts for quality, but its
# latency and cost (none) would flatter the arm's speed and price, so those skip it.
CALLED = Q(response_cached=False)
# The attempts quality counts: what the model did, well or badly (Attempt.outcome, decided
# once when the attempt was recorded).
MODEL_SCORED = Q(outcome__in=SCORED)
MODEL_FAILED = Q(outcome=OutcomeClass.MODEL_FAILURE)
INFRASTRUCTURE_FAILED = Q(outcome=OutcomeClass.INFRASTRUCTURE_FAILURE)


@dataclass(frozen=True)
class ArmRow:
    arm_id: int
    label: str
    provider: str
    model_name: str
    # Attempts the model had its turn at: answered, or failed through the model's doing.
    # Infrastructure failures (an outage, a refused key, the platform) say nothing about the
    # model and are counted apart; cancelled attempts do not count.
    n: int
    resolved: int
    failed: int  # model failures
    resolved_rate: float | None
    ci_low: float | None
    ci_high: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    first_token_p50_ms: float | None  # None when no attempt's answer was streamed
    output_tokens_per_s_median: float | None
    cost_usd: Decimal | None  # None when any answered attempt's price is unknown
    cost_per_resolved_usd: Decimal | None  # over the attempts that made a call
    error_rate: float | None  # model failures over n
    cached: int = 0  # answered from the response cache: in n and resolved, not in latency or cost
    infrastructure_failed: int = 0  # not in n: not the model's doing

    @property
    def low_sample(self) -> bool:
        return self.n < LOW_SAMPLE


def arm_leaderboard(attempts: QuerySet) -> list[ArmRow]:
    """Rank arms by resolved rate, then by the interval's lower bound, then by cost."""
    rows = (
        attempts.values("arm_id", "arm__label", "arm__provider", "arm__model_name", "arm__position")
        .annotate(
            n=Count("id", filter=MODEL_SCORED),
            resolved_count=Count("id", filter=MODEL_SCORED & Q(resolved=True)),
            resolved_called=Count("id", filter=MODEL_SCORED & Q(resolved=True) & CALLED),
            failed_count=Count("id", filter=MODEL_FAILED),
            infrastructure_count=Count("id", filter=INFRASTRUCTURE_FAILED),
            cached_count=Count("id", filter=~CALLED),
            # A CASE rather than an aggregate FILTER: SQLite's percentile is a plain function.
            p50=Percentile(_called("latency_ms"), 0.5),
            p95=Percentile(_called("latency_ms"), 0.95),
            first_token_p50=Percentile(_called("first_token_ms"), 0.5),
            tokens_per_s_median=Percentile(_called("output_tokens_per_s"), 0.5),
            cost=Sum("cost_usd", filter=CALLED),
            unpriced=Count("id", filter=Q(status=COMPLETED, cost_usd__isnull=True) & CALLED),
        )
        .order_by("arm__position", "arm_id")
    )
    board = [_row(values) for values in rows]
    return sorted(board, key=lambda r: (-(r.resolved_rate or 0), -(r.ci_low or 0), r.cost_usd or Decimal("Infinity")))


def _called(field: str) -> Case:
    return Case(When(CALLED, then=F(field)))


def _row(values: dict) -> ArmRow:
    n, resolved, resolved_called = values["n"], values["resolved_count"], values["resolved_called"]
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
        first_token_p50_ms=values["first_token_p50"],
        output_tokens_per_s_median=values["tokens_per_s_median"],
        cost_usd=cost,
        cost_per_resolved_usd=(cost / resolved_called).quantize(Decimal("0.00000001"))
        if cost is not None and resolved_called
        else None,
        error_rate=values["failed_count"] / n if n else None,
        cached=values["cached_count"],
        infrastructure_failed=values["infrastructure_count"],
    )


@dataclass(frozen=True)
class PatchQualityRow:
    """Rule metrics of an arm's answered attempts; a rate is over the attempts where the
    metric applies (lint and build only where a Python file changed and the patch applied)."""

    arm_id: int
    label: str
    answered: int
    well_formed_rate: float | None
    applied_rate: float | None
    fail_to_pass_mean: float | None  # mean share of FAIL_TO_PASS tests fixed (repository tasks)
    pass_to_pass_regressions: int | None  # total PASS_TO_PASS tests broken (repository tasks)
    build_ok_rate: float | None
    lint_clean_rate: float | None
    lines_changed_mean: float | None


def arm_patch_quality(attempts: QuerySet) -> list[PatchQualityRow]:
    answered = Q(status=COMPLETED)
    rows = (
        attempts.values("arm_id", "arm__label", "arm__position")
        .annotate(
            n_answered=Count("id", filter=answered),
            n_present=Count("id", filter=answered & Q(patch_present=True)),
            n_well_formed=Count("id", filter=answered & Q(patch_well_formed=True)),
            # Over validated attempts: an inference-only run applies nothing and says nothing.
            n_applied=Count("id", filter=answered & Q(patch_applied=True, validated_at__isnull=False)),
            n_validated=Count("id", filter=answered & Q(validated_at__isnull=False)),
            mean_f2p=Avg("fail_to_pass_fraction", filter=answered),
            sum_p2p=Sum("pass_to_pass_regressions", filter=answered),
            n_built=Count("id", filter=answered & Q(build_ok=True)),
            n_build_checked=Count("id", filter=answered & Q(build_ok__isnull=False)),
            n_lint_clean=Count("id", filter=answered & Q(lint_clean=True)),
            n_lint_checked=Count("id", filter=answered & Q(lint_clean__isnull=False)),
            mean_lines=Avg("lines_changed", filter=answered & Q(patch_well_formed=True)),
        )
        .order_by("arm__position", "arm_id")
    )
    return [
        PatchQualityRow(
            arm_id=values["arm_id"],
            label=values["arm__label"],
            answered=values["n_answered"],
            well_formed_rate=_share(values["n_well_formed"], values["n_present"]),
            applied_rate=_share(values["n_applied"], values["n_validated"]),
            fail_to_pass_mean=values["mean_f2p"],
            pass_to_pass_regressions=values["sum_p2p"],
            build_ok_rate=_share(values["n_built"], values["n_build_checked"]),
            lint_clean_rate=_share(values["n_lint_clean"], values["n_lint_checked"]),
            lines_changed_mean=values["mean_lines"],
        )
        for values in rows
    ]


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class EvaluatorRow:
    """One arm's evaluator score under one profile."""

    arm_id: int
    label: str
    profile: str
    judged: int
    errors: int
    mean_overall: float | None  # None below MIN_JUDGED judged attempts: "insufficient data"
    ci_low: float | None
    ci_high: float | None
    cost_usd: Decimal | None = None  # the evaluator's own cost, never added to the arm's; None if unknown

    @property
    def insufficient(self) -> bool:
        return self.judged < MIN_JUDGED


def arm_evaluator_scores(verdicts: QuerySet) -> list[EvaluatorRow]:
    """``verdicts``: a run's verdicts. Counts and means in SQL; the interval resamples the
    overall scores of each (arm, profile) group, fetched as one column."""
    groups = (
        verdicts.values(
            "attempt__arm_id",
            "attempt__arm__label",
            "attempt__arm__position",
            "profile_id",
            "profile__name",
            "profile__version",
            "profile__provider",
        )
        .annotate(
            n_judged=Count("id", filter=Q(status=JUDGED)),
            n_errors=Count("id", filter=Q(status=EVALUATOR_ERROR)),
            mean=Avg("overall", filter=Q(status=JUDGED)),
            cost=Sum("cost_usd"),
            unpriced=Count("id", filter=Q(cost_usd__isnull=True) & ~Q(status="pending")),
        )
        .order_by("profile_id", "attempt__arm__position", "attempt__arm_id")
    )
    scores: dict[tuple[int, int], list[float]] = {}
    for arm_id, profile_id, overall in verdicts.filter(status=JUDGED).values_list(
        "attempt__arm_id", "profile_id", "overall"
    ):
        scores.setdefault((arm_id, profile_id), []).append(overall)
    rows = []
    for group in groups:
        key = (group["attempt__arm_id"], group["profile_id"])
        enough = group["n_judged"] >= MIN_JUDGED
        interval = bootstrap_mean_interval(scores[key], seed=key[0]) if enough else None
        mock = " (mock)" if group["profile__provider"] == "mock" else ""
        label = f"{group['profile__name']}:v{group['profile__version']}{mock}"
        rows.append(
            EvaluatorRow(
                arm_id=key[0],
                label=group["attempt__arm__label"],
                profile=label,
                judged=group["n_judged"],
                errors=group["n_errors"],
                mean_overall=group["mean"] if enough else None,
                ci_low=interval[0] if interval else None,
                ci_high=interval[1] if interval else None,
                cost_usd=None if group["unpriced"] else group["cost"],
            )
        )
    return rows
