"""Per-arm totals, aggregated in SQL from whatever attempts are handed in, and the rows
boards show, built from those totals (fresh, or as stored in a run's ArmSummary)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import numpy as np
from django.db.models import (
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    When,
)
from django.db.models.functions import Cast, Coalesce, JSONArray, JSONObject

from leaderboards.sketches import bucket as sketch_bucket
from leaderboards.sql import Percentile, Quantiles, RowVersion, WidthBucket
from leaderboards.stats import LOW_SAMPLE, MIN_JUDGED, bootstrap_mean_interval_from_counts, wilson_interval
from providers.adapters.config import solver_label
from providers.outcomes import CONFIGURATION_FAILURES, INFRASTRUCTURE_FAILURES, SCORED, OutcomeClass

# Attempt statuses as plain strings: leaderboards take a queryset, not the experiments app.
COMPLETED = "completed"
SINGLE_TURN = "single_turn"
JUDGED, EVALUATOR_ERROR = "judged", "evaluator_error"  # verdict statuses, likewise
# An attempt that reused a cached answer made no call: it counts for quality, but its
# latency and cost (none) would flatter the arm's speed and price, so those skip it.
CALLED = Q(response_cached=False)
ANSWERED_CALLED = Q(status=COMPLETED) & CALLED
# The attempts quality counts: what the model did, well or badly (Attempt.outcome, decided
# once when the attempt was recorded). Patch metrics look at the model's answers alone.
# An answer whose correctness is still open is not counted, neither right nor wrong: a
# free-text answer waits for its evaluator's verdict (resolved stays NULL until then),
# while every other kind decides it when the answer is recorded.
SUCCESS = Q(outcome=OutcomeClass.SUCCESS)
AWAITING_VERDICT = SUCCESS & Q(resolved__isnull=True)
MODEL_SCORED = Q(outcome__in=SCORED) & ~AWAITING_VERDICT
MODEL_FAILED = Q(outcome=OutcomeClass.MODEL_FAILURE)
INFRASTRUCTURE_FAILED = Q(outcome=OutcomeClass.INFRASTRUCTURE_FAILURE)
# Refused for the arm's own settings: neither scored nor the infrastructure's, counted apart.
CONFIGURATION_FAILED = Q(outcome=OutcomeClass.CONFIGURATION_FAILURE)
# A patch git apply refused and patch --fuzz=5 took, as SWE-bench's harness would (the
# attempt's apply_method): a board can leave those out.
FUZZED = Q(apply_method="patch_fuzz")
# An agent's attempt the model had its turn at (experiments/agent.py records its turns): what
# turns and tool calls per attempt are counted over. An infrastructure failure midway is not
# the model's doing, and a single-turn answer has no turns at all (NULL).
AGENT_TURNED = Q(outcome__in=SCORED) & Q(turns__isnull=False)
# Attempts that made a call and know their tokens (a failure before any answer knows none).
TOKENS_KNOWN = CALLED & Q(input_tokens__isnull=False)
# Upper edges of the latency histogram's buckets, in ms; the last bucket is open-ended.
LATENCY_BUCKETS_MS = (100, 250, 500, 1000, 2500, 5000, 10_000, 25_000, 50_000, 100_000)


def arm_totals() -> dict[str, Any]:
    """The aggregates of one arm's attempts, named as ArmSummary's fields (its percentiles
    exact, where a summary reads them off its sketches)."""
    return additive_totals() | {
        # A CASE rather than an aggregate FILTER: SQLite's percentiles are plain functions.
        "latency_quantiles": Quantiles(_called("latency_ms")),
        "first_token_p50_ms": Percentile(_called("first_token_ms"), 0.5),
        "tokens_per_s_median": Percentile(_called("output_tokens_per_s"), 0.5),
    }


def additive_totals() -> dict[str, Any]:
    """The aggregates of arm_totals() that add up: counts, sums and counts per key (causes,
    the latency histogram), so a summary of two sets of attempts is the sum of theirs."""
    return {
        "scored": Count("id", filter=MODEL_SCORED),
        "model_successes": Count("id", filter=SUCCESS),
        "model_failures": Count("id", filter=MODEL_FAILED),
        "infrastructure_failures": Count("id", filter=INFRASTRUCTURE_FAILED),
        # In the same scan: a query of its own would read every attempt once more.
        "infrastructure_causes": _infrastructure_causes(),
        "configuration_failures": Count("id", filter=CONFIGURATION_FAILED),
        "configuration_causes": _causes(CONFIGURATION_FAILED, CONFIGURATION_FAILURES),
        "resolved": Count("id", filter=SUCCESS & Q(resolved=True)),
        "cached": Count("id", filter=MODEL_SCORED & ~CALLED),
        "fail_to_pass_sum": Sum("fail_to_pass_fraction", filter=SUCCESS, default=0.0),
        "fail_to_pass_counted": Count("fail_to_pass_fraction", filter=SUCCESS),
        "regressions": Sum("pass_to_pass_regressions", filter=SUCCESS, default=0),
        "regressions_counted": Count("pass_to_pass_regressions", filter=SUCCESS),
        "patch_present": Count("id", filter=SUCCESS & Q(patch_present=True)),
        "well_formed": Count("id", filter=SUCCESS & Q(patch_well_formed=True)),
        # Over validated attempts: an inference-only run applies nothing and says nothing.
        "validated": Count("validated_at", filter=SUCCESS),
        "applied": Count("validated_at", filter=SUCCESS & Q(patch_applied=True)),
        "applied_fuzzed": Count("id", filter=SUCCESS & FUZZED),
        "resolved_fuzzed": Count("id", filter=SUCCESS & FUZZED & Q(resolved=True)),
        "build_checked": Count("build_ok", filter=SUCCESS),
        "built": Count("id", filter=SUCCESS & Q(build_ok=True)),
        "lint_checked": Count("lint_clean", filter=SUCCESS),
        "lint_clean": Count("id", filter=SUCCESS & Q(lint_clean=True)),
        "lines_changed_sum": Sum("lines_changed", filter=SUCCESS & Q(patch_well_formed=True), default=0),
        "lines_counted": Count("lines_changed", filter=SUCCESS & Q(patch_well_formed=True)),
        "latency_measured": Count("latency_ms", filter=CALLED),
        "latency_histogram": JSONArray(*(Count("id", filter=CALLED & bucket) for bucket in _latency_buckets())),
        "answered_called": Count("id", filter=ANSWERED_CALLED),
        "unpriced": Count("id", filter=ANSWERED_CALLED & Q(cost_usd__isnull=True)),
        "cost_usd": Sum("cost_usd", filter=CALLED),
        "cost_squares": Sum(Cast("cost_usd", FloatField()) * Cast("cost_usd", FloatField()), filter=CALLED),
        "resolved_called": Count("id", filter=SUCCESS & Q(resolved=True) & CALLED),
        "agent_attempts": Count("id", filter=AGENT_TURNED),
        "agent_turns": Sum("turns", filter=AGENT_TURNED, default=0),
        "agent_tool_calls": Sum(Coalesce("tool_calls", 0), filter=AGENT_TURNED, default=0),
        "tokens_counted": Count("id", filter=TOKENS_KNOWN),
        "tokens_called": Sum(_tokens(), filter=TOKENS_KNOWN, default=0),
    }


# The attempts a summary counts: recorded, as completed or failed. A queued, running or
# cancelled attempt has no outcome and no timings, so no summary figure moves with it.
RECORDED = Q(status__in=(COMPLETED, "failed"))


def attempts_fingerprint() -> dict[str, Any]:
    """How many recorded attempts there are and the sum of their row versions: the same two
    numbers only while none of them was written (ArmSummary.attempts_seen and
    attempts_version). Claims and requeues of unrecorded attempts leave them alone, so
    recording can keep them exact: it adds the chunk it records (summaries.fold_recorded)."""
    return {
        "attempts_seen": Count("id", filter=RECORDED),
        "attempts_version": Sum(RowVersion(), filter=RECORDED, default=0),
    }


# additive_totals()' counts per key: a rebuild counts them with a GROUP BY per key instead
# (keyed_counts), which costs the scan far less than a FILTERed count per key and row.
COUNTED_BY_KEY = ("infrastructure_causes", "configuration_causes", "latency_histogram")


def latency_bucket() -> Case:
    """The latency histogram's bucket (0..len(LATENCY_BUCKETS_MS)) of an answer that made a
    call, as _latency_buckets() bound them: found by one search over the edges (WidthBucket),
    where a WHEN per bucket tested the call and both its edges again, eleven times on a long
    latency (0.3 s of the sketches' 1.3 s of CPU at 1M attempts)."""
    measured = CALLED & Q(latency_ms__gte=0)
    return Case(When(measured, then=WidthBucket("latency_ms", LATENCY_BUCKETS_MS)), output_field=IntegerField())


def keyed_counts(
    arm: dict[str, Any], outcome: str | None, category: str | None, latency: int | None, count: int
) -> None:
    """Add ``count`` attempts of one (outcome, error category) or one latency bucket to the
    arm's COUNTED_BY_KEY totals, as additive_totals() counts them."""
    if latency is not None:
        histogram = arm.setdefault("latency_histogram", [0] * (len(LATENCY_BUCKETS_MS) + 1))
        histogram[latency] += count
        return
    if outcome == OutcomeClass.INFRASTRUCTURE_FAILURE and (category in INFRASTRUCTURE_FAILURES or category == ""):
        causes = arm.setdefault("infrastructure_causes", {})
        cause = str(category) or HARNESS
    elif outcome == OutcomeClass.CONFIGURATION_FAILURE and category in CONFIGURATION_FAILURES:
        causes, cause = arm.setdefault("configuration_causes", {}), str(category)
    else:
        return
    causes[cause] = causes.get(cause, 0) + count


def sketch_buckets() -> dict[str, Any]:
    """Per summary sketch (leaderboards/sketches.py), the bucket of each attempt's value: of
    the answers that made a call, as the percentiles arm_totals() reads exactly."""
    return {
        "latency_sketch": sketch_bucket("latency_ms", CALLED),
        "first_token_sketch": sketch_bucket("first_token_ms", CALLED),
        "tokens_per_s_sketch": sketch_bucket("output_tokens_per_s", CALLED),
    }


# Annotations may not share a name with a field of the model (``cost_usd``, ``resolved``):
# a filter or F() naming the field would read the aggregate instead.
TOTAL = "total__"


def totals_by(
    attempts: QuerySet, *group: str, also: Mapping[str, Any] | None = None, totals: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """arm_totals() (or ``totals``, and ``also``'s aggregates) of each group of these attempts,
    in one query, named as the fields."""
    aggregates = dict(arm_totals() if totals is None else totals) | dict(also or {})
    rows = attempts.values(*group).annotate(**{TOTAL + name: total for name, total in aggregates.items()})
    return [{key.removeprefix(TOTAL): value for key, value in row.items()} for row in rows.order_by(*group)]


class GroupedTotals:
    """Totals (aggregates with a FILTER, as additive_totals() defines them) counted from
    groups of attempts instead of attempt by attempt: the attempts are grouped by every column
    the filters read (by whether it is NULL, where that is all they ask of it), each group
    aggregated once with no FILTER, and a total adds up the groups its filter holds for, tested
    here on the group's columns. Thirty-odd FILTERed aggregates cost the scan far more than
    hashing a dozen more columns (3.0 s of CPU at 1M attempts, 1.3 s), and the groups are a
    few hundred. The definitions stay the fold's: only how they are evaluated moves.

    A filter may test the attempt's own columns only, with exact, ``in`` and ``isnull``
    lookups (ValueError otherwise): Django's SQL for those is two-valued, NULL matching no
    value even under a negation, as Python's == is."""

    def __init__(self, totals: Mapping[str, Any]) -> None:
        self.rules: list[tuple[str, str, Q, Any]] = []  # (total, its part, filter, default)
        self.parts: dict[str, Any] = {}
        parts_by_source: dict[tuple[type, Any], str] = {}
        for name, total in totals.items():
            source = (type(total), total.get_source_expressions()[0])
            part = parts_by_source.setdefault(source, TOTAL + name)
            self.parts.setdefault(part, type(total)(source[1]))
            # A count over nothing is 0, a sum NULL (or its default).
            default = total.empty_result_set_value if total.default is None else total.default
            self.rules.append((name, part, total.filter or Q(), default))
        tested = [lookup for _, _, condition, _ in self.rules for lookup in _lookups(condition)]
        valued = {column for column, kind in tested if kind != "isnull"}
        self.columns = sorted(valued)
        self.null_flags = sorted({column for column, _ in tested} - valued)

    def grouped(self, attempts: QuerySet, *group: str, also: Mapping[str, Any] | None = None) -> QuerySet:
        """The attempts' groups: ``group``'s columns and the filters', each group's parts (and
        ``also``'s aggregates)."""
        flags = {
            _null_flag(column): ExpressionWrapper(Q(**{f"{column}__isnull": True}), output_field=BooleanField())
            for column in self.null_flags
        }
        columns = [*group, *(column for column in self.columns if column not in group)]
        return attempts.values(*columns, **flags).annotate(**self.parts, **dict(also or {})).order_by()

    def totals(self, groups: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """The totals of these groups (rows of grouped()), named as the totals handed in: a
        count is its groups' counts added, a sum their sums (NULL, then the default, when every
        group's is NULL, as SQL's SUM)."""
        added: dict[str, Any] = {name: None for name, *_ in self.rules}
        for group in groups:
            for name, part, condition, _ in self.rules:
                if _holds(condition, group):
                    added[name] = _plus(added[name], group[part])
        return {name: _or_default(added[name], default) for name, _, _, default in self.rules}


def _lookups(condition: Q) -> list[tuple[str, str]]:
    """(column, lookup) of each test in the filter."""
    found = []
    for child in condition.children:
        if isinstance(child, Q):
            found += _lookups(child)
        else:
            lookup, _ = _test(child)
            column, _, kind = lookup.partition("__")
            if kind not in ("", "exact", "in", "isnull"):
                raise ValueError(f"a total's filter tests {lookup}: only exact, in and isnull are counted per group")
            found.append((column, kind or "exact"))
    return found


def _test(child: Any) -> tuple[str, Any]:
    """A filter's (lookup, value) test; not an expression, which only SQL can evaluate, on
    either side (a column compared with F() would equal no value here)."""
    if not isinstance(child, tuple) or _is_expression(child[1]) or any(map(_is_expression, _values(child[1]))):
        raise ValueError(f"a total's filter tests {child!r}: only lookups of values are counted per group")
    return child


def _is_expression(value: Any) -> bool:
    return hasattr(value, "resolve_expression")


def _values(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (list, tuple, set, frozenset)) else ()


def _holds(condition: Q, group: Mapping[str, Any]) -> bool:
    if condition.connector not in (Q.AND, Q.OR):
        raise ValueError(f"a total's filter joins its tests with {condition.connector}: only AND and OR")
    results = (
        _holds(child, group) if isinstance(child, Q) else _matches(*_test(child), group) for child in condition.children
    )
    held = all(results) if condition.connector == Q.AND else any(results)
    return held != condition.negated


def _matches(lookup: str, value: Any, group: Mapping[str, Any]) -> bool:
    column, _, kind = lookup.partition("__")
    if kind == "isnull" or value is None:
        is_null = group[column] is None if column in group else bool(group[_null_flag(column)])
        return is_null == (True if value is None else value)
    actual = group[column]
    if actual is None:
        return False
    return actual in value if kind == "in" else actual == value


def _null_flag(column: str) -> str:
    return f"{column}_is_null"


def _plus(total: Any, value: Any) -> Any:
    return value if total is None else total if value is None else total + value


def _or_default(total: Any, default: Any) -> Any:
    return default if total is None else total


HARNESS = "harness"  # the cause of an infrastructure failure that came with an answer (error_category "")


def _infrastructure_causes() -> JSONObject:
    """Infrastructure failures per cause: each error category, and the harness's (none)."""
    return _causes(INFRASTRUCTURE_FAILED, INFRASTRUCTURE_FAILURES, harness=True)


def _causes(outcome: Q, categories: frozenset, harness: bool = False) -> JSONObject:
    """The attempts of one outcome class per error category (and the harness's, named so)."""
    causes = [*([(HARNESS, "")] if harness else []), *((str(c), str(c)) for c in sorted(categories))]
    return JSONObject(**{cause: Count("id", filter=outcome & Q(error_category=category)) for cause, category in causes})


def _tokens() -> Any:
    return Coalesce("input_tokens", 0) + Coalesce("output_tokens", 0)


def _called(field: str) -> Case:
    return Case(When(CALLED, then=F(field)))


def _latency_buckets() -> list[Q]:
    edges = (0, *LATENCY_BUCKETS_MS)
    buckets = [Q(latency_ms__gte=low, latency_ms__lt=high) for low, high in itertools.pairwise(edges)]
    return [*buckets, Q(latency_ms__gte=edges[-1])]


def latency_percentile(quantiles: list[float] | None, percent: int) -> float | None:
    return None if quantiles is None else quantiles[percent]


def median_interval(quantiles: list[float] | None, measured: int, z: float = 1.96) -> tuple[float, float] | None:
    """A distribution-free 95% interval of the median: the order statistics at ranks
    n/2 -+ z * sqrt(n)/2 (the binomial's normal approximation), read off the stored
    percentiles by linear interpolation."""
    if quantiles is None or measured == 0:
        return None
    half_width = z * 0.5 / np.sqrt(measured)
    steps = np.linspace(0, 1, len(quantiles))
    low, high = np.interp([max(0.0, 0.5 - half_width), min(1.0, 0.5 + half_width)], steps, quantiles)
    return float(low), float(high)


@dataclass(frozen=True)
class ArmRow:
    arm_id: int
    label: str
    provider: str
    model_name: str
    # Attempts the model had its turn at: answered, or failed through the model's doing.
    # Infrastructure failures (an outage, a refused key, the platform, a test harness that
    # gave no verdict) say nothing about the model and are counted apart; cancelled attempts
    # do not count.
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
    error_rate: float | None  # model failures over every turn the model had (``turns``)
    cached: int = 0  # answered from the response cache: in n and resolved, not in latency or cost
    infrastructure_failed: int = 0  # not in n: not the model's doing
    configuration_failed: int = 0  # not in n: refused for the arm's own settings
    solver: str = SINGLE_TURN  # the arm's config["solver"]: "agent" works in a loop with tools
    # An agent arm's work, over its attempts the model had its turn at; None for a single-turn arm.
    turns_per_attempt: float | None = None
    tool_calls_per_attempt: float | None = None
    # Input and output tokens of the answers that made a call, per answer and per resolved task
    # (as the cost board's per task and per resolved); None while no call's tokens are known.
    tokens_per_task: float | None = None
    tokens_per_resolved: float | None = None

    @property
    def low_sample(self) -> bool:
        return self.n < LOW_SAMPLE

    @property
    def shown_label(self) -> str:
        return solver_label(self.label, self.solver)

    @classmethod
    def from_totals(cls, arm: Any, totals: Any) -> ArmRow:
        """``arm``: its id, label, provider, model_name and solver; ``totals``: arm_totals()'s names."""
        n, resolved = totals.scored, totals.resolved
        interval = wilson_interval(resolved, n)
        cost = arm_cost(totals)
        return cls(
            arm_id=arm.id,
            label=arm.label,
            provider=arm.provider,
            model_name=arm.model_name,
            n=n,
            resolved=resolved,
            failed=totals.model_failures,
            resolved_rate=resolved / n if n else None,
            ci_low=interval[0] if interval else None,
            ci_high=interval[1] if interval else None,
            latency_p50_ms=latency_percentile(totals.latency_quantiles, 50),
            latency_p95_ms=latency_percentile(totals.latency_quantiles, 95),
            first_token_p50_ms=totals.first_token_p50_ms,
            output_tokens_per_s_median=totals.tokens_per_s_median,
            cost_usd=cost,
            cost_per_resolved_usd=_per(cost, totals.resolved_called),
            error_rate=share(totals.model_failures, turns(totals)),
            cached=totals.cached,
            infrastructure_failed=totals.infrastructure_failures,
            configuration_failed=totals.configuration_failures,
            solver=arm.solver or SINGLE_TURN,
            turns_per_attempt=share(totals.agent_turns, totals.agent_attempts),
            tool_calls_per_attempt=share(totals.agent_tool_calls, totals.agent_attempts),
            tokens_per_task=share(totals.tokens_called, totals.answered_called) if totals.tokens_counted else None,
            tokens_per_resolved=share(totals.tokens_called, totals.resolved_called) if totals.tokens_counted else None,
        )


def turns(totals: Any) -> int:
    """The attempts the model had its turn at: its answers, with a verdict or not, and its
    failures. Errors are counted over these, not over ``scored``: an inference-only run gives
    no answer a verdict, so ``scored`` holds its failures alone and every error rate read 100%."""
    return totals.model_successes + totals.model_failures


def arm_cost(totals: Any) -> Decimal | None:
    """What the arm's calls cost; unknown (None) while any answer has no price."""
    return None if totals.unpriced else (totals.cost_usd or Decimal(0))


def _per(cost: Decimal | None, count: int) -> Decimal | None:
    return (cost / count).quantize(Decimal("0.00000001")) if cost is not None and count else None


ARM_FIELDS = {
    "arm_id": "id",
    "arm__label": "label",
    "arm__provider": "provider",
    "arm__model_name": "model_name",
    "arm__config__solver": "solver",  # JSON null or absent: single-turn
}


def _fresh_totals(attempts: QuerySet) -> list[tuple[SimpleNamespace, SimpleNamespace]]:
    """Each arm of these attempts and its totals, in one query."""
    rows = totals_by(attempts, "arm__position", *ARM_FIELDS)
    return [
        (SimpleNamespace(**{name: row[key] for key, name in ARM_FIELDS.items()}), SimpleNamespace(**row))
        for row in rows
    ]


def arm_leaderboard(attempts: QuerySet) -> list[ArmRow]:
    """Rank arms by resolved rate, then by the interval's lower bound, then by cost."""
    board = [ArmRow.from_totals(arm, totals) for arm, totals in _fresh_totals(attempts)]
    return sorted(board, key=lambda r: (-(r.resolved_rate or 0), -(r.ci_low or 0), r.cost_usd or Decimal("Infinity")))


# The patch figures of a PatchQualityRow, in the order every board, export and API shows them.
PATCH_FIGURES = (
    "well_formed_rate",
    "applied_rate",
    "fail_to_pass_mean",
    "pass_to_pass_regressions",
    "build_ok_rate",
    "lint_clean_rate",
    "lines_changed_mean",
)


@dataclass(frozen=True)
class PatchQualityRow:
    """Rule metrics of an arm's answers; a rate is over the answers where the metric applies
    (lint and build only where a Python file changed and the patch applied)."""

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

    @classmethod
    def from_totals(cls, arm: Any, totals: Any) -> PatchQualityRow:
        return cls(
            arm_id=arm.id,
            label=arm.label,
            answered=totals.model_successes,
            well_formed_rate=share(totals.well_formed, totals.patch_present),
            applied_rate=share(totals.applied, totals.validated),
            fail_to_pass_mean=share(totals.fail_to_pass_sum, totals.fail_to_pass_counted),
            pass_to_pass_regressions=totals.regressions if totals.regressions_counted else None,
            build_ok_rate=share(totals.built, totals.build_checked),
            lint_clean_rate=share(totals.lint_clean, totals.lint_checked),
            lines_changed_mean=share(totals.lines_changed_sum, totals.lines_counted),
        )


def arm_patch_quality(attempts: QuerySet) -> list[PatchQualityRow]:
    return [PatchQualityRow.from_totals(arm, totals) for arm, totals in _fresh_totals(attempts)]


def share(part: float, whole: int) -> float | None:
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


def profile_label(name: str, version: int, provider: str) -> str:
    mock = " (mock)" if provider == "mock" else ""
    return f"{name}:v{version}{mock}"


SCORES = 101  # overall scores run 0..100


def evaluator_interval(group: Mapping[str, Any]) -> tuple[float, float] | None:
    """The bootstrap interval of the mean overall score of an evaluator_totals() group, from
    how many judged verdicts gave each score 0..100; None below MIN_JUDGED verdicts. Seeded
    by the run's seed and the arm's place in it, so a page shows the same interval twice and
    a run repeated with the same seed the same interval."""
    scores = group["scores"]
    if sum(scores) < MIN_JUDGED:
        return None
    seed = [group["attempt__run__seed"] % 2**32, group["attempt__arm__position"]]
    return bootstrap_mean_interval_from_counts(scores, seed=seed)


def evaluator_row(
    arm_id: int, label: str, profile: str, counts: Mapping[str, Any], interval: tuple[float, float] | None
) -> EvaluatorRow:
    """``counts``: judged, errors, overall_sum, cost and unpriced (and rated, the judged with an
    overall score, when not all are); ``interval``: evaluator_interval's."""
    judged = counts["judged"]
    # The verdicts with a 0-100 score: a free-text verdict (truthful, informative) has none.
    rated = counts.get("rated", judged)
    enough = rated >= MIN_JUDGED
    return EvaluatorRow(
        arm_id=arm_id,
        label=label,
        profile=profile,
        judged=judged,
        errors=counts["errors"],
        mean_overall=counts["overall_sum"] / rated if enough else None,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        cost_usd=None if counts["unpriced"] else counts["cost"],
    )


EVALUATOR_GROUP = (
    "attempt__run__seed",
    "attempt__arm_id",
    "attempt__arm__label",
    "attempt__arm__position",
    "profile_id",
    "profile__name",
    "profile__version",
    "profile__provider",
)


def evaluator_totals(verdicts: QuerySet) -> list[dict[str, Any]]:
    """Per (arm, profile) of these verdicts: EVALUATOR_GROUP's fields, judged, errors,
    overall_sum, cost, unpriced, and ``scores``, how many judged verdicts gave each overall
    score 0..100. One GROUP BY down to the score; Python only adds up its few hundred rows."""
    rows = verdicts.values(*EVALUATOR_GROUP, "status", "overall").annotate(
        verdicts=Count("id"),
        cost=Sum("cost_usd"),
        unpriced=Count("id", filter=Q(cost_usd__isnull=True) & ~Q(status="pending")),
    )
    groups: dict[tuple[int, int], dict[str, Any]] = {}
    for row in rows.order_by():
        group = groups.setdefault(
            (row["attempt__arm_id"], row["profile_id"]),
            {**{field: row[field] for field in EVALUATOR_GROUP}, "judged": 0, "errors": 0, "overall_sum": 0}
            | {"cost": None, "unpriced": 0, "scores": [0] * SCORES},
        )
        count = row["verdicts"]
        if row["status"] == JUDGED:
            group["judged"] += count
            if row["overall"] is not None:
                group["scores"][row["overall"]] += count
                group["overall_sum"] += row["overall"] * count
        elif row["status"] == EVALUATOR_ERROR:
            group["errors"] += count
        if row["cost"] is not None:
            group["cost"] = (group["cost"] or 0) + row["cost"]
        group["unpriced"] += row["unpriced"]
    return sorted(groups.values(), key=lambda g: (g["profile_id"], g["attempt__arm__position"], g["attempt__arm_id"]))


def arm_evaluator_scores(verdicts: QuerySet) -> list[EvaluatorRow]:
    """``verdicts``: a run's verdicts. Counts, sums and the scores' distribution in SQL."""
    return [
        evaluator_row(
            group["attempt__arm_id"],
            group["attempt__arm__label"],
            profile_label(group["profile__name"], group["profile__version"], group["profile__provider"]),
            group | {"rated": sum(group["scores"])},
            evaluator_interval(group),
        )
        for group in evaluator_totals(verdicts)
    ]
