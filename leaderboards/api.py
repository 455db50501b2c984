"""The JSON API's boards: a run's leaderboards and pairwise verdicts, and the organisation's
board over several runs (mounted by prbench/api.py).

Every figure comes from the functions the pages call (leaderboards/pages.py and boards.py),
read from the run's summaries as the pages read them: the API never counts differently.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db.models import Max
from django.http import HttpRequest, QueryDict
from ninja import Query, Router, Schema

from experiments.access import access_run
from experiments.models import Run
from leaderboards.aggregation import PATCH_FIGURES, ArmRow, PatchQualityRow
from leaderboards.boards import Board, Entry, RunBoards, run_boards
from leaderboards.crossrun import ArmTrend, CrossRunBoard, MatchedArm, TrendPoint
from leaderboards.forms import CrossRunForm
from leaderboards.jobs import refresh_if_out_of_date
from leaderboards.models import ArmSummary
from leaderboards.pages import GIT_APPLY_ONLY, cross_run_page, pairwise_page, per_refresh
from leaderboards.pairwise import RunPairwise
from leaderboards.stats import PairedVerdict
from orgs.access import access_current_org
from orgs.api_auth import READ
from prbench.api_support import COMMON_ERRORS, form_invalid

router = Router(tags=["leaderboards"])


# --- schemas ---------------------------------------------------------------------------------


class Arm(Schema):
    label: str
    provider: str
    model: str
    solver: str  # single_turn (asked once) or agent (a loop with tools)


class QualityEntry(Schema):
    rank: int | None
    arm: Arm
    scored: int  # attempts the model had its turn at (infrastructure failures left out)
    scored_tasks: int
    successes: int
    rate: float | None
    ci_low: float | None  # the 95% Wilson interval of the rate
    ci_high: float | None
    model_failures: int
    error_rate: float | None
    cached: int
    infrastructure_failed: int
    configuration_failed: int  # refused for the arm's own settings: neither scored nor the infrastructure's
    low_sample: bool
    applied_fuzzed: int
    well_formed_rate: float | None = None
    applied_rate: float | None = None
    fail_to_pass_mean: float | None = None
    pass_to_pass_regressions: int | None = None
    build_ok_rate: float | None = None
    lint_clean_rate: float | None = None
    lines_changed_mean: float | None = None


class SpeedEntry(Schema):
    rank: int | None
    arm: Arm
    calls: int
    latency_p50_ms: float | None
    p50_ci_low: float | None  # distribution-free 95% interval of the median
    p50_ci_high: float | None
    latency_p95_ms: float | None
    first_token_p50_ms: float | None
    output_tokens_per_s_median: float | None
    low_sample: bool
    latency_histogram: list[int]  # attempts per bucket of latency_buckets_ms, the last open-ended


class CostEntry(Schema):
    rank: int | None
    arm: Arm
    calls: int
    unpriced: int
    cost_usd: float | None  # null while any answer has no price: never a guessed cost
    cost_per_task_usd: float | None
    ci_low: float | None  # the 95% normal interval of the cost per task
    ci_high: float | None
    cost_per_resolved_usd: float | None
    low_sample: bool
    # An agent arm's turns and tool calls per attempt; null for a single-turn arm. Tokens
    # (input and output) per answer that made a call and per resolved task, for every arm.
    turns_per_attempt: float | None
    tool_calls_per_attempt: float | None
    tokens_per_task: float | None
    tokens_per_resolved: float | None


class EvaluatorEntry(Schema):
    rank: int | None  # among the arms judged by the same profile
    arm: Arm
    profile: str
    judged: int
    errors: int
    mean_overall: float | None  # null below 10 judged answers
    ci_low: float | None
    ci_high: float | None
    evaluator_cost_usd: float | None
    low_sample: bool


class ReliabilityEntry(Schema):
    arm: str
    finished: int
    infrastructure_failures: int
    share: float | None
    causes: dict[str, int]
    configuration_failures: int
    configuration_causes: dict[str, int]


class QualityBoard(Schema):
    metric: str
    entries: list[QualityEntry]


class SpeedBoard(Schema):
    latency_buckets_ms: list[int]
    entries: list[SpeedEntry]


class CostBoard(Schema):
    entries: list[CostEntry]


class EvaluatorBoard(Schema):
    entries: list[EvaluatorEntry]


class RunLeaderboards(Schema):
    run: UUID
    refreshed_at: datetime | None
    low_sample_min: int
    git_apply_only: bool
    patches: bool
    quality: QualityBoard | None  # null for an inference-only run: nothing was validated
    speed: SpeedBoard
    cost: CostBoard
    evaluator: EvaluatorBoard
    reliability: list[ReliabilityEntry]


class PairOut(Schema):
    a: str
    b: str
    shared_tasks: int
    wins: int
    ties: int
    losses: int
    mean_difference: float | None  # A - B per task, averaged
    ci_low: float | None  # paired bootstrap 95% interval of that difference
    ci_high: float | None
    p_value: float
    significant: bool
    verdict: str


class CellOut(Schema):
    win_rate: float | None
    shared_tasks: int
    significant: bool


class RatingOut(Schema):
    arm: str
    rank: int | None
    rating: float | None  # Bradley-Terry, Elo scale
    ci_low: float | None
    ci_high: float | None
    battles: int


class RunPairwiseOut(Schema):
    run: UUID
    metric: str | None
    refusal: str  # why there is no comparison (an inference-only run), or ""
    arms: list[str]
    pairs: list[PairOut]
    matrix: list[list[CellOut]]  # matrix[i][j]: arms[i] against arms[j]
    ratings: list[RatingOut]


class MatchedArmOut(Schema):
    key: str
    label: str
    provider: str
    model: str
    config: dict[str, Any]


class CrossRunEntryOut(Schema):
    rank: int | None  # 1 + the arms significantly better in a paired verdict; null: no scored task
    arm: MatchedArmOut
    runs: list[UUID]
    tasks: int  # tasks it was scored on, in any of its runs
    scored: int
    successes: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    low_sample: bool


class TrendPointOut(Schema):
    run: UUID
    scored: int
    successes: int
    rate: float
    ci_low: float | None
    ci_high: float | None
    previous_run: UUID | None
    mean_difference: float | None  # against the previous run, on the tasks both scored
    diff_ci_low: float | None
    diff_ci_high: float | None
    p_value: float | None
    regressed: bool
    verdict: str


class ArmTrendOut(Schema):
    arm: MatchedArmOut
    regressions: int
    points: list[TrendPointOut]


class CrossRunOut(Schema):
    metric: str
    runs: list[UUID]  # in time order
    low_sample_min: int
    entries: list[CrossRunEntryOut]
    pairs: list[PairOut]  # every two arms with a scored task, on the tasks both were scored on
    trends: list[ArmTrendOut]


# --- endpoints -------------------------------------------------------------------------------


@router.get(
    "/runs/{run_id}/leaderboards",
    response={200: RunLeaderboards, **COMMON_ERRORS},
    auth=READ,
    summary="A run's boards: quality, speed, cost, evaluator and reliability, as its page shows them",
)
def run_leaderboards(request: HttpRequest, run_id: str, apply: str = Query("", pattern="^(git)?$")) -> RunLeaderboards:
    """Ranked best first; an arm's rank is 1 + the arms significantly better than it, so arms
    whose intervals overlap share one. ``apply=git``: the quality board counts only patches
    `git apply` took, as the page's toggle does."""
    run = access_run(request, run_id)
    refresh_if_out_of_date(run.pk)
    # Built once per refresh of the run's summaries and kept in the cache under it, as the
    # page's breakdowns are: a CI job or dashboard polling a finished run reads it from Redis.
    refreshed = ArmSummary.objects.filter(run_id=run.pk).aggregate(last=Max("refreshed_at"))["last"]

    def build(run: Run) -> RunLeaderboards:
        return boards_out(run, run_boards(run, {}, lambda board, sort: "", git_apply_only=apply == GIT_APPLY_ONLY))

    return per_refresh(run, refreshed, f"api-leaderboards-{apply or 'all'}", build)


@router.get(
    "/runs/{run_id}/pairwise",
    response={200: RunPairwiseOut, **COMMON_ERRORS},
    auth=READ,
    summary="Every pair of a run's arms on their shared tasks, and Bradley-Terry ratings",
)
def run_pairwise(request: HttpRequest, run_id: str) -> RunPairwiseOut:
    run = access_run(request, run_id)
    pairwise: RunPairwise | None = pairwise_page(run)["pairwise"]
    if pairwise is None:
        refusal = "An inference-only run resolved nothing: there is nothing to compare."
        return RunPairwiseOut(run=run.code, metric=None, refusal=refusal, arms=[], pairs=[], matrix=[], ratings=[])
    return pairwise_out(run, pairwise)


class CrossRunQuery(Schema):
    runs: list[str] = []
    dataset: str | None = None
    days: int | None = None


@router.get(
    "/leaderboards/cross-run",
    response={200: CrossRunOut, **COMMON_ERRORS},
    auth=READ,
    summary="The organisation's quality board over finished runs of one dataset, and each arm's trend",
)
def cross_run(request: HttpRequest, query: Query[CrossRunQuery]) -> CrossRunOut:
    """Runs named one by one (``runs=ID&runs=ID``), or every finished run of a dataset in the
    last ``days``: the rules of the organisation board's page. An id that is unknown or not the
    organisation's is refused as not found, whichever it is."""
    membership = access_current_org(request)
    data = QueryDict(mutable=True)
    data.setlist("runs", query.runs)
    for name in ("dataset", "days"):
        value = getattr(query, name)
        if value is not None:
            data[name] = str(value)
    form = CrossRunForm(data, request=request, org=membership.org)
    if not form.is_valid():
        raise form_invalid(form, default_field="runs")
    page = cross_run_page(form.cleaned_data["selected"])
    return cross_run_out(page["board"], page["trends"])


# --- from the boards' dataclasses to the schemas ----------------------------------------------


def _arm(row: ArmRow) -> Arm:
    return Arm(label=row.label, provider=row.provider, model=row.model_name, solver=row.solver)


def _number(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def _interval(entry: Entry) -> tuple[float | None, float | None]:
    return entry.interval if entry.interval else (None, None)


def boards_out(run: Run, boards: RunBoards) -> RunLeaderboards:
    return RunLeaderboards(
        run=run.code,
        refreshed_at=boards.refreshed_at,
        low_sample_min=boards.low_sample_min,
        git_apply_only=boards.git_apply_only,
        patches=boards.patches,
        quality=_quality(boards.quality, boards.metric, boards.patches) if boards.quality else None,
        speed=SpeedBoard(
            latency_buckets_ms=list(boards.latency_buckets), entries=[_speed(e) for e in boards.speed.entries]
        ),
        cost=CostBoard(entries=[_cost(e) for e in boards.cost.entries]),
        evaluator=EvaluatorBoard(entries=[_evaluator(e) for e in boards.evaluator.entries if e.evaluator]),
        reliability=[
            ReliabilityEntry(
                arm=row["label"],
                finished=row["finished"],
                infrastructure_failures=row["failed"],
                share=row["share"],
                causes=dict(row["causes"]),
                configuration_failures=row["misconfigured"],
                configuration_causes=dict(row["configuration_causes"]),
            )
            for row in boards.reliability
        ],
    )


def _quality(board: Board, metric: str, patches: bool) -> QualityBoard:
    def entry(e: Entry) -> QualityEntry:
        low, high = _interval(e)
        patch: PatchQualityRow | None = e.patch if patches else None
        return QualityEntry(
            rank=e.rank,
            arm=_arm(e.arm),
            scored=e.arm.n,
            scored_tasks=e.extra["scored_tasks"],
            successes=e.arm.resolved,
            rate=e.arm.resolved_rate,
            ci_low=low,
            ci_high=high,
            model_failures=e.arm.failed,
            error_rate=e.arm.error_rate,
            cached=e.arm.cached,
            infrastructure_failed=e.arm.infrastructure_failed,
            configuration_failed=e.arm.configuration_failed,
            low_sample=e.low_sample,
            applied_fuzzed=e.extra["applied_fuzzed"],
            **{name: getattr(patch, name) for name in PATCH_FIGURES if patch is not None},
        )

    return QualityBoard(metric=metric, entries=[entry(e) for e in board.entries])


def _speed(e: Entry) -> SpeedEntry:
    low, high = _interval(e)
    return SpeedEntry(
        rank=e.rank,
        arm=_arm(e.arm),
        calls=e.extra["calls"],
        latency_p50_ms=e.arm.latency_p50_ms,
        p50_ci_low=low,
        p50_ci_high=high,
        latency_p95_ms=e.arm.latency_p95_ms,
        first_token_p50_ms=e.arm.first_token_p50_ms,
        output_tokens_per_s_median=e.arm.output_tokens_per_s_median,
        low_sample=e.low_sample,
        latency_histogram=list(e.extra["histogram"] or []),
    )


def _cost(e: Entry) -> CostEntry:
    low, high = _interval(e)
    return CostEntry(
        rank=e.rank,
        arm=_arm(e.arm),
        calls=e.extra["calls"],
        unpriced=e.extra["unpriced"],
        cost_usd=_number(e.arm.cost_usd),
        cost_per_task_usd=_number(e.extra["per_task"]),
        ci_low=low,
        ci_high=high,
        cost_per_resolved_usd=_number(e.arm.cost_per_resolved_usd),
        low_sample=e.low_sample,
        turns_per_attempt=e.arm.turns_per_attempt,
        tool_calls_per_attempt=e.arm.tool_calls_per_attempt,
        tokens_per_task=e.arm.tokens_per_task,
        tokens_per_resolved=e.arm.tokens_per_resolved,
    )


def _evaluator(e: Entry) -> EvaluatorEntry:
    assert e.evaluator is not None
    return EvaluatorEntry(
        rank=e.rank,
        arm=_arm(e.arm),
        profile=e.evaluator.profile,
        judged=e.evaluator.judged,
        errors=e.evaluator.errors,
        mean_overall=e.evaluator.mean_overall,
        ci_low=e.evaluator.ci_low,
        ci_high=e.evaluator.ci_high,
        evaluator_cost_usd=_number(e.evaluator.cost_usd),
        low_sample=e.low_sample,
    )


def pairwise_out(run: Run, pairwise: RunPairwise) -> RunPairwiseOut:
    return RunPairwiseOut(
        run=run.code,
        metric=pairwise.metric,
        refusal="",
        arms=pairwise.labels,
        pairs=[_pair_out(pair.a, pair.b, pair.verdict, pair.sentence) for pair in pairwise.pairs],
        matrix=[
            [CellOut(win_rate=cell.win_rate, shared_tasks=cell.shared, significant=cell.significant) for cell in row]
            for row in pairwise.matrix
        ],
        ratings=[
            RatingOut(
                arm=rated.label,
                rank=rated.rank,
                rating=rated.rating.rating if rated.rating else None,
                ci_low=rated.rating.ci_low if rated.rating else None,
                ci_high=rated.rating.ci_high if rated.rating else None,
                battles=rated.rating.battles if rated.rating else 0,
            )
            for rated in pairwise.ratings
        ],
    )


def _matched(arm: MatchedArm) -> MatchedArmOut:
    return MatchedArmOut(key=arm.key, label=arm.label, provider=arm.provider, model=arm.model_name, config=arm.config)


def _pair_out(a: str, b: str, verdict: PairedVerdict, sentence: str) -> PairOut:
    return PairOut(
        a=a,
        b=b,
        shared_tasks=verdict.shared_tasks,
        wins=verdict.wins,
        ties=verdict.ties,
        losses=verdict.losses,
        mean_difference=verdict.mean_difference,
        ci_low=verdict.ci_low,
        ci_high=verdict.ci_high,
        p_value=verdict.p_value,
        significant=verdict.significant,
        verdict=sentence,
    )


def cross_run_out(board: CrossRunBoard, trends: list[ArmTrend]) -> CrossRunOut:
    codes = {run.pk: run.code for run in board.runs}
    return CrossRunOut(
        metric=board.metric,
        runs=[run.code for run in board.runs],
        low_sample_min=board.low_sample_min,
        entries=[
            CrossRunEntryOut(
                rank=entry.rank,
                arm=_matched(entry.arm),
                runs=[codes[run_id] for run_id in entry.arm.run_ids],
                tasks=entry.tasks,
                scored=entry.scored,
                successes=entry.successes,
                rate=entry.rate,
                ci_low=entry.interval[0] if entry.interval else None,
                ci_high=entry.interval[1] if entry.interval else None,
                low_sample=entry.low_sample,
            )
            for entry in board.entries
        ],
        pairs=[_pair_out(pair.a.label, pair.b.label, pair.verdict, pair.sentence) for pair in board.pairs],
        trends=[
            ArmTrendOut(
                arm=_matched(trend.arm),
                regressions=trend.regressions,
                points=[_trend_point(point) for point in trend.points],
            )
            for trend in trends
        ],
    )


def _trend_point(point: TrendPoint) -> TrendPointOut:
    verdict = point.against_previous
    return TrendPointOut(
        run=point.run.code,
        scored=point.scored,
        successes=point.successes,
        rate=point.rate,
        ci_low=point.interval[0] if point.interval else None,
        ci_high=point.interval[1] if point.interval else None,
        previous_run=point.previous_run.code if point.previous_run else None,
        mean_difference=verdict.mean_difference if verdict else None,
        diff_ci_low=verdict.ci_low if verdict else None,
        diff_ci_high=verdict.ci_high if verdict else None,
        p_value=verdict.p_value if verdict else None,
        regressed=point.regressed,
        verdict=point.sentence,
    )
