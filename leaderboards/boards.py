"""A run's four boards (quality, speed, cost, evaluator) and its reliability table, built from
the run's summaries: a page reads a few rows per arm, never the attempts.

Every board ranks with intervals, not point estimates: an arm's rank is 1 + the number of arms
significantly better on that board (their interval wholly on the better side of its own), so
arms whose intervals overlap share a rank. An arm with nothing to rank on has no rank.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.http import QueryDict

from evaluation.models import EvaluatorProfile
from evaluation.workloads import workload_for
from evaluation.workloads.wording import Wording, wording_for
from experiments.models import Run, RunArm
from leaderboards.aggregation import (
    LATENCY_BUCKETS_MS,
    ArmRow,
    EvaluatorRow,
    PatchQualityRow,
    arm_cost,
    evaluator_row,
    median_interval,
    profile_label,
    turns,
)
from leaderboards.models import ArmEvaluatorSummary, ArmSummary
from leaderboards.stats import ci_aware_ranks

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


# What the quality board calls success, per workload kind: the heading, and the verb of the
# pairwise page's sentences.
def quality_metric(run: Run) -> tuple[str, str]:
    """The quality board's heading and what a success does, as the dataset's kind names them."""
    return workload_for(run.experiment.dataset.kind).quality_metric


def low_sample_min() -> int:
    return settings.PRBENCH_LOW_SAMPLE_MIN


@dataclass(frozen=True)
class Column:
    key: str  # the sort key; "" for a column that does not sort
    heading: str
    title: str = ""  # what the figure is, as a tooltip
    higher_first: bool = False  # a first click sorts best first: highest first for these


@dataclass(frozen=True)
class Heading:
    column: Column
    url: str  # the page sorted on this column (the other way round when it already is)
    direction: str  # "ascending", "descending", or "" when the board is not sorted on it


@dataclass
class Entry:
    """One arm's line on a board: its figures (``arm``, and the board's own), its rank and
    the interval the rank compares."""

    arm: ArmRow
    rank: int | None = None
    interval: tuple[float, float] | None = None
    value: float | None = None  # the figure the board ranks on
    low_sample: bool = False
    patch: PatchQualityRow | None = None
    evaluator: EvaluatorRow | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Board:
    name: str
    title: str
    explanation: str
    headings: list[Heading]
    entries: list[Entry]
    sort: str


SortLinks = Callable[[str, str], str]  # (board name, sort value) -> URL


@dataclass
class RunBoards:
    metric: str  # "Resolved", "Accuracy"
    quality: Board | None  # None for an inference-only run: nothing was validated
    speed: Board
    cost: Board
    evaluator: Board
    reliability: list[dict[str, Any]]
    latency_buckets: Sequence[int] = LATENCY_BUCKETS_MS
    refreshed_at: Any = None
    low_sample_min: int = field(default_factory=low_sample_min)
    git_apply_only: bool = False
    patches: bool = True  # the answers are patches: the quality board shows their tests and whether they applied
    words: Wording = field(default_factory=lambda: wording_for("pr_patch"))  # the run's kind's

    @property
    def fuzzed(self) -> int:
        """Patches only the harness's fallback (patch --fuzz=5) applied, on the quality board's arms."""
        return sum(entry.extra.get("applied_fuzzed", 0) for entry in self.quality.entries) if self.quality else 0

    @property
    def judged(self) -> bool:
        """Whether the evaluator reviews the run's kind: a page shows its board only then (the
        exports keep the board, empty, so their shape does not depend on the kind)."""
        return self.words.judged

    @property
    def agents(self) -> bool:
        """Whether any arm is an agent: the page then shows what the agents' work took."""
        return any(entry.arm.solver == "agent" for entry in self.cost.entries)

    @property
    def boards(self) -> list[Board]:
        evaluator = self.evaluator if self.judged else None
        return [board for board in (self.quality, self.speed, self.cost, evaluator) if board]


@dataclass(frozen=True)
class BoardRows:
    """The rows a run's boards are built from: its arms with their summaries, and its arms'
    evaluator summaries with their profiles."""

    arms: list[RunArm]
    evaluator: list[ArmEvaluatorSummary]

    def fingerprint(self) -> str:
        """A digest of every column of every row: it moves whenever any figure the boards show
        could move (a fold, a rebuild, a renamed profile), whichever code wrote it."""
        values = [(_columns(arm), _columns(getattr(arm, "summary", None))) for arm in self.arms]
        values += [(_columns(summary), _columns(summary.profile)) for summary in self.evaluator]
        return hashlib.blake2b(repr(values).encode(), digest_size=16).hexdigest()


def _columns(row: models.Model | None) -> tuple[Any, ...]:
    return () if row is None else tuple(getattr(row, field.attname) for field in row._meta.concrete_fields)


def board_rows_digest(run: Run) -> str | None:
    """What ``BoardRows.fingerprint`` is for, computed by Postgres from the rows' text, without
    reading them: every column of the run's arms, their summaries, their evaluator summaries
    and those summaries' profiles. Reading seventy columns a summary into models to hash them
    was most of a run page poll whose boards are kept. None on a database that cannot
    (SQLite): read the rows and take their fingerprint."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(BOARD_ROWS_DIGEST, {"run": run.pk})
        return cursor.fetchone()[0]


# A row's text (its composite value cast to text) holds every column of its table, so a
# column added later is in the digest without a change here. Ordered as board_rows reads
# them, ties broken by id: the same rows always give the same text.
BOARD_ROWS_DIGEST = f"""
SELECT md5(
    coalesce((
        SELECT string_agg(arm::text || '/' || coalesce(summary::text, ''), ';' ORDER BY arm.position, arm.id)
        FROM {RunArm._meta.db_table} AS arm
        LEFT JOIN {ArmSummary._meta.db_table} AS summary ON summary.arm_id = arm.id
        WHERE arm.run_id = %(run)s
    ), '')
    || '#' ||
    coalesce((
        SELECT string_agg(
            evaluator::text || '/' || profile::text, ';'
            ORDER BY profile.name, profile.version DESC, arm.position, evaluator.arm_id, evaluator.id
        )
        FROM {ArmEvaluatorSummary._meta.db_table} AS evaluator
        JOIN {EvaluatorProfile._meta.db_table} AS profile ON profile.id = evaluator.profile_id
        JOIN {RunArm._meta.db_table} AS arm ON arm.id = evaluator.arm_id
        WHERE evaluator.run_id = %(run)s
    ), '')
)
"""


def board_rows(run: Run) -> BoardRows:
    """Two queries, whatever the run's size."""
    arms = list(RunArm.objects.filter(run=run).select_related("summary").order_by("position", "pk"))
    evaluator = list(
        ArmEvaluatorSummary.objects.filter(run=run)
        .select_related("profile")
        .order_by("profile__name", "-profile__version", "arm__position", "arm_id")
    )
    return BoardRows(arms, evaluator)


def run_boards(
    run: Run, sorts: dict[str, str], links: SortLinks, git_apply_only: bool = False, rows: BoardRows | None = None
) -> RunBoards:
    """The run's boards, each sorted as ``sorts`` asks (board name -> sort value, e.g.
    "-rate"; an unknown value sorts by rank), from ``rows`` (read here when not given: two
    queries, whatever the run's size). ``git_apply_only``: the quality board counts a patch
    only git apply took as applied (and resolved); by default, one the harness's fallback
    (patch --fuzz=5) took counts too."""
    if rows is None:
        rows = board_rows(run)
    summaries = [(arm, _summary_of(arm)) for arm in rows.arms]
    arm_rows = [ArmRow.from_totals(arm, summary) for arm, summary in summaries]
    metric, _ = quality_metric(run)
    words = wording_for(run.experiment.dataset.kind)
    patches = words.patches
    board = _Builder(sorts, links)
    quality_summaries = [(arm, without_fuzzed(summary)) for arm, summary in summaries] if git_apply_only else summaries
    quality_rows = [ArmRow.from_totals(arm, summary) for arm, summary in quality_summaries]
    return RunBoards(
        metric=metric,
        quality=None if run.inference_only else board.quality(quality_summaries, quality_rows, metric, patches),
        git_apply_only=git_apply_only,
        patches=patches,
        words=words,
        speed=board.speed(summaries, arm_rows),
        cost=board.cost(summaries, arm_rows, words.per_success),
        evaluator=board.evaluator(rows.evaluator, arm_rows),
        reliability=reliability(summaries),
        refreshed_at=max((summary.refreshed_at for _, summary in summaries if summary.pk), default=None),
    )


def without_fuzzed(summary: ArmSummary) -> ArmSummary:
    """The summary as if patches only patch --fuzz=5 could apply had not applied."""
    strict = copy.copy(summary)
    strict.applied -= summary.applied_fuzzed
    strict.resolved -= summary.resolved_fuzzed
    return strict


def _summary_of(arm: RunArm) -> ArmSummary:
    """The arm's summary, or an empty one (all zero) before its run's first refresh."""
    # A missing reverse one-to-one raises a DoesNotExist that is also an AttributeError.
    return getattr(arm, "summary", None) or ArmSummary(arm=arm, run_id=arm.run_id)


QUALITY_COLUMNS = [
    Column("rank", "Rank", "1 + the number of arms whose 95% interval lies wholly above this arm's"),
    Column("arm", "Arm"),
    Column("n", "Scored", "Attempts the model had its turn at: answered, or failed by its own doing", True),
    Column("rate", "{metric}", "Share of the scored attempts; infrastructure failures are left out", True),
    Column("", "95% CI", "Wilson interval"),
    Column("f2p", "FAIL_TO_PASS fixed", "Mean share of the FAIL_TO_PASS tests an answer fixed", True),
    Column("regressions", "PASS_TO_PASS broken", "PASS_TO_PASS tests the answers broke, in all"),
    Column("applied", "Applied", "Of the validated answers, those whose patch applied", True),
    Column("errors", "Model failures", "Failures of the model's own doing (timeout, refused request), of the scored"),
]
PATCH_COLUMNS = {"f2p", "regressions", "applied"}  # a patch's own: its tests, whether it applied
SPEED_COLUMNS = [
    Column("rank", "Rank", "1 + the number of arms whose median latency is significantly lower"),
    Column("arm", "Arm"),
    Column("calls", "Calls", "Answers that made a provider call (cached ones took no time of their own)", True),
    Column("p50", "p50 ms", "Median latency of the successful try"),
    Column("", "95% CI of p50", "Distribution-free interval of the median (order statistics)"),
    Column("p95", "p95 ms"),
    Column("ttft", "TTFT p50 ms", "Time to the first streamed token, median"),
    Column("tps", "tok/s", "Output tokens per second after the first, median", True),
]
COST_COLUMNS = [
    Column("rank", "Rank", "1 + the number of arms whose cost per task is significantly lower"),
    Column("arm", "Arm"),
    Column("calls", "Calls", "Answers that made a provider call", True),
    Column("total", "Total", "What the arm's calls cost; unknown while any answer has no price"),
    Column("per_task", "Per task", "Mean cost of an answer that made a call"),
    Column("", "95% CI", "Normal interval of that mean"),
    Column("per_resolved", "Per resolved task", "Total over the successful answers that made a call"),
]
EVALUATOR_COLUMNS = [
    Column("rank", "Rank", "1 + the number of arms whose mean score is significantly higher, per evaluator"),
    Column("arm", "Arm"),
    Column("", "Evaluator"),
    Column("mean", "Mean", "Mean overall score, 0-100", True),
    Column("", "95% CI", "Bootstrap of the mean"),
    Column("judged", "Judged", "", True),
    Column("errors", "Evaluator errors", "No valid answer after one repair"),
    Column("", "Evaluator cost", "Paid by the platform, not part of the arm's cost"),
]

SORTS: dict[str, dict[str, Callable[[Entry], Any]]] = {
    "quality": {
        "arm": lambda e: e.arm.label.lower(),
        "n": lambda e: e.arm.n,
        "rate": lambda e: e.arm.resolved_rate,
        "f2p": lambda e: e.patch and e.patch.fail_to_pass_mean,
        "regressions": lambda e: e.patch and e.patch.pass_to_pass_regressions,
        "applied": lambda e: e.patch and e.patch.applied_rate,
        "errors": lambda e: e.arm.error_rate,
    },
    "speed": {
        "arm": lambda e: e.arm.label.lower(),
        "calls": lambda e: e.extra["calls"],
        "p50": lambda e: e.arm.latency_p50_ms,
        "p95": lambda e: e.arm.latency_p95_ms,
        "ttft": lambda e: e.arm.first_token_p50_ms,
        "tps": lambda e: e.arm.output_tokens_per_s_median,
    },
    "cost": {
        "arm": lambda e: e.arm.label.lower(),
        "calls": lambda e: e.extra["calls"],
        "total": lambda e: e.arm.cost_usd,
        "per_task": lambda e: e.extra["per_task"],
        "per_resolved": lambda e: e.arm.cost_per_resolved_usd,
    },
    "evaluator": {
        "arm": lambda e: e.arm.label.lower(),
        "mean": lambda e: e.evaluator and e.evaluator.mean_overall,
        "judged": lambda e: e.evaluator and e.evaluator.judged,
        "errors": lambda e: e.evaluator and e.evaluator.errors,
    },
}
BOARD_NAMES = tuple(SORTS)


class _Builder:
    def __init__(self, sorts: dict[str, str], links: SortLinks):
        self.sorts, self.links = sorts, links
        self.minimum = low_sample_min()

    def quality(
        self, summaries: list[tuple[RunArm, ArmSummary]], rows: list[ArmRow], metric: str, patches: bool = True
    ) -> Board:
        entries = []
        for (arm, summary), row in zip(summaries, rows, strict=True):
            entries.append(
                Entry(
                    arm=row,
                    interval=both(row.ci_low, row.ci_high),
                    value=row.resolved_rate,
                    low_sample=0 < summary.scored_tasks < self.minimum,
                    patch=PatchQualityRow.from_totals(arm, summary),
                    extra={"scored_tasks": summary.scored_tasks, "applied_fuzzed": summary.applied_fuzzed},
                )
            )
        _rank(entries, higher_is_better=True)
        columns = [
            Column(c.key, c.heading.format(metric=metric), c.title, c.higher_first)
            for c in QUALITY_COLUMNS
            if patches or c.key not in PATCH_COLUMNS
        ]
        explanation = (
            f"{metric} rate of the attempts the model had its turn at, with its 95% Wilson interval. "
            "Infrastructure failures are not the model's doing: they are counted apart, under reliability."
        )
        return self._board("quality", "Quality", explanation, columns, self._sorted("quality", entries))

    def speed(self, summaries: list[tuple[RunArm, ArmSummary]], rows: list[ArmRow]) -> Board:
        entries = [
            Entry(
                arm=row,
                interval=median_interval(summary.latency_quantiles, summary.latency_measured),
                value=row.latency_p50_ms,
                low_sample=0 < summary.latency_measured < self.minimum,
                extra={"calls": summary.latency_measured, "histogram": summary.latency_histogram},
            )
            for (_, summary), row in zip(summaries, rows, strict=True)
        ]
        _rank(entries, higher_is_better=False)
        explanation = "Latency of the successful try of each answer that made a call; lower ranks first."
        return self._board("speed", "Speed", explanation, SPEED_COLUMNS, self._sorted("speed", entries))

    def cost(
        self, summaries: list[tuple[RunArm, ArmSummary]], rows: list[ArmRow], per_success: str = "Per resolved task"
    ) -> Board:
        entries = []
        for (_, summary), row in zip(summaries, rows, strict=True):
            per_task, interval = _mean_cost(summary)
            entries.append(
                Entry(
                    arm=row,
                    interval=interval,
                    value=None if per_task is None else float(per_task),
                    low_sample=0 < summary.answered_called < self.minimum,
                    extra={"calls": summary.answered_called, "per_task": per_task, "unpriced": summary.unpriced},
                )
            )
        _rank(entries, higher_is_better=False)
        explanation = (
            "What the arm's calls cost. An arm with an answer of unknown price has an unknown cost, "
            "never a guessed one, and no rank."
        )
        columns = [
            replace(column, heading=per_success) if column.key == "per_resolved" else column for column in COST_COLUMNS
        ]
        return self._board("cost", "Cost", explanation, columns, self._sorted("cost", entries))

    def evaluator(self, summaries: list[ArmEvaluatorSummary], rows: list[ArmRow]) -> Board:
        """``summaries``: in their profiles' order, then the arms'."""
        by_arm = {row.arm_id: row for row in rows}
        by_profile: dict[str, list[Entry]] = {}
        for summary in summaries:
            profile = summary.profile
            counts = {
                "judged": summary.judged,
                "rated": sum(summary.overall_counts),
                "errors": summary.errors,
                "overall_sum": summary.overall_sum,
                "cost": summary.cost_usd,
                "unpriced": summary.unpriced,
            }
            name = profile_label(profile.name, profile.version, profile.provider)
            stored = (
                (summary.ci_low, summary.ci_high)
                if summary.ci_low is not None and summary.ci_high is not None
                else None
            )
            row = evaluator_row(summary.arm_id, by_arm[summary.arm_id].label, name, counts, stored)
            interval = (row.ci_low, row.ci_high) if row.ci_low is not None and row.ci_high is not None else None
            by_profile.setdefault(name, []).append(
                Entry(
                    arm=by_arm[summary.arm_id],
                    interval=interval,
                    value=row.mean_overall,
                    low_sample=0 < row.judged < self.minimum,
                    evaluator=row,
                )
            )
        entries = []
        for group in by_profile.values():
            _rank(group, higher_is_better=True)
            entries.extend(self._sorted("evaluator", group))
        explanation = (
            "The platform's evaluator, blind to the arm, scores each answer 0-100; each profile's arms are "
            "ranked apart. Below 10 judged answers no mean is shown."
        )
        return self._board("evaluator", "Evaluator", explanation, EVALUATOR_COLUMNS, entries)

    def _board(self, name: str, title: str, explanation: str, columns: list[Column], entries: list[Entry]) -> Board:
        """``entries``: sorted already (the evaluator's profile by profile)."""
        sort = self._sort(name)
        return Board(
            name=name,
            title=title,
            explanation=explanation,
            headings=[self._heading(name, column, sort) for column in columns],
            entries=entries,
            sort=sort,
        )

    def _sort(self, name: str) -> str:
        asked = self.sorts.get(name, "")
        return asked if asked.removeprefix("-") in (*SORTS[name], "rank") else "rank"

    def _heading(self, name: str, column: Column, sort: str) -> Heading:
        if not column.key:
            return Heading(column, "", "")
        sorted_here = sort.removeprefix("-") == column.key
        descending = sort.startswith("-")
        if sorted_here:
            direction = "descending" if descending else "ascending"
            flipped = column.key if descending else f"-{column.key}"
            return Heading(column, self.links(name, flipped), direction)
        first = f"-{column.key}" if column.higher_first else column.key
        return Heading(column, self.links(name, first), "")

    def _sorted(self, name: str, entries: list[Entry]) -> list[Entry]:
        """By rank (best first, then by the ranked figure), or by a column; an arm without the
        figure comes last either way."""
        sort = self._sort(name)
        key, descending = sort.removeprefix("-"), sort.startswith("-")
        figure = (lambda e: e.rank) if key == "rank" else SORTS[name][key]
        present = [e for e in entries if figure(e) is not None]
        present.sort(key=figure, reverse=descending)
        return present + [e for e in entries if figure(e) is None]


def both(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (low, high)


def _rank(entries: list[Entry], higher_is_better: bool) -> None:
    """Rank the entries in place, and order them best first (ci_aware_ranks' order)."""
    intervals = {
        index: (e.interval[0], e.interval[1], e.value) if e.interval and e.value is not None else None
        for index, e in enumerate(entries)
    }
    ranks = ci_aware_ranks(intervals, higher_is_better=higher_is_better)
    ordered = [entries[index] for index in ranks]
    for index, rank in ranks.items():
        entries[index].rank = rank
    entries[:] = ordered


def _mean_cost(summary: ArmSummary) -> tuple[Decimal | None, tuple[float, float] | None]:
    """The mean cost of an answer that made a call, and its 95% normal interval."""
    cost, calls = arm_cost(summary), summary.answered_called
    if cost is None or not calls:
        return None, None
    mean = cost / calls
    if calls < 2 or summary.cost_squares is None:
        return mean.quantize(Decimal("0.00000001")), None
    variance = max(0.0, (summary.cost_squares - calls * float(mean) ** 2) / (calls - 1))
    half = Z95 * math.sqrt(variance / calls)
    return mean.quantize(Decimal("0.00000001")), (float(mean) - half, float(mean) + half)


def reliability(summaries: list[tuple[RunArm, ArmSummary]]) -> list[dict[str, Any]]:
    """Per arm: its finished attempts, how many the infrastructure failed and why, and how
    many the provider refused for the arm's own settings, and why."""
    rows = []
    for arm, summary in summaries:
        # An unjudged answer is finished too.
        finished = turns(summary) + summary.infrastructure_failures + summary.configuration_failures
        rows.append(
            {
                "label": arm.label,
                "shown_label": arm.shown_label,
                "finished": finished,
                "failed": summary.infrastructure_failures,
                "share": summary.infrastructure_failures / finished if finished else None,
                "causes": _by_count(summary.infrastructure_causes),
                "misconfigured": summary.configuration_failures,
                "configuration_causes": _by_count(summary.configuration_causes),
            }
        )
    return rows


def _by_count(causes: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(causes.items(), key=lambda item: (-item[1], item[0]))


# On the run page each board's sort has a parameter of its own, so sorting one keeps the others.
def run_page_sorts(query: QueryDict) -> dict[str, str]:
    return {name: query.get(f"{name}_sort", "") for name in BOARD_NAMES}


def run_page_links(path: str, query: QueryDict) -> SortLinks:
    def link(name: str, sort: str) -> str:
        changed = query.copy()
        changed[f"{name}_sort"] = sort
        return f"{path}?{changed.urlencode()}"

    return link
