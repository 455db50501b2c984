"""Runs compared with each other: an organisation's quality board over several runs of one
dataset, each arm's trend from run to run, and run A against run B task by task.

Arms are matched across runs by what they are, not what they are called (``arm_key``).
Everything reads the runs' task summaries (leaderboards/models.py), never their attempts.
Arms are compared pair by pair, on the tasks both were scored on, so a comparison never mixes
an easy sample with a hard one; and never on the tasks every arm shares: one arm whose provider
was down (no scored task) or twenty runs that sampled different tasks left none, and emptied
the board for every arm.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import IntegerField, Sum, Value

from datasets.models import TaskInstance
from experiments.models import Run, RunArm
from leaderboards.boards import low_sample_min, quality_metric
from leaderboards.models import TaskSummary
from leaderboards.stats import (
    PairedVerdict,
    paired_ranks,
    paired_verdict,
    paired_verdicts,
    pairwise_verdicts,
    wilson_interval,
)
from providers.adapters.config import answer_config
from providers.response_cache import canonical_json

ARM_KEY_LENGTH = 12  # hex digits: 48 bits, far more than an organisation has arms


def arm_key(provider: str, model_name: str, config: dict) -> str:
    """Which arm this is in any run: a hash of the provider, the model name and the settings
    that shape its answers. Retries, timeouts and concurrency (answer_config leaves them out)
    change how an arm is called, not what it answers; its label and credential are names a
    team may change between runs and are left out too. A different temperature or output
    limit makes another arm."""
    identity = {"provider": provider, "model": model_name, "config": answer_config(config)}
    return hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:ARM_KEY_LENGTH]


@dataclass(frozen=True)
class MatchedArm:
    """One arm as it appears in one or more runs: ``arm_ids`` are its RunArm rows, in the
    runs' time order (the template's arm cell reads label, provider and model_name)."""

    key: str
    label: str  # its label in the latest run it appears in
    provider: str
    model_name: str
    config: dict
    arm_ids: tuple[int, ...]
    run_ids: tuple[int, ...]

    @property
    def config_text(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in sorted(self.config.items())) or "default settings"


def in_time_order(runs: Sequence[Run]) -> list[Run]:
    return sorted(runs, key=lambda run: (run.created_at, run.pk))


def match_arms(runs: Sequence[Run]) -> list[MatchedArm]:
    """The runs' arms grouped by arm_key, in the order they first appear (runs in time order,
    then each run's arm order). One query."""
    order = {run.pk: index for index, run in enumerate(in_time_order(runs))}
    arms = sorted(RunArm.objects.filter(run__in=runs), key=lambda arm: (order[arm.run_id], arm.position, arm.pk))
    grouped: dict[str, list[RunArm]] = {}
    for arm in arms:
        grouped.setdefault(arm_key(arm.provider, arm.model_name, arm.config), []).append(arm)
    return [
        MatchedArm(
            key=key,
            label=members[-1].label,
            provider=members[0].provider,
            model_name=members[0].model_name,
            config=answer_config(members[0].config),
            arm_ids=tuple(arm.pk for arm in members),
            run_ids=tuple(dict.fromkeys(arm.run_id for arm in members)),
        )
        for key, members in grouped.items()
    ]


@dataclass
class CrossRunEntry:
    arm: MatchedArm
    tasks: int  # tasks it was scored on, in any of its runs; 0: listed as not scored
    scored: int  # attempts at those tasks, over every run the arm appears in
    successes: int
    rate: float | None
    interval: tuple[float, float] | None
    low_sample: bool
    rank: int | None = None


@dataclass(frozen=True)
class CrossRunPair:
    """Two arms on the tasks both were scored on (each task's share of successes, pooled
    over their runs): the paired verdict the ranks are drawn from."""

    a: MatchedArm
    b: MatchedArm
    verdict: PairedVerdict  # A against B
    sentence: str


@dataclass
class CrossRunBoard:
    runs: list[Run]  # in time order
    metric: str
    entries: list[CrossRunEntry]  # best first; the arms with no scored task last
    pairs: list[CrossRunPair]  # every two arms with a scored task, in the order of entries
    low_sample_min: int = field(default_factory=low_sample_min)

    @property
    def unscored(self) -> list[CrossRunEntry]:
        return [entry for entry in self.entries if not entry.tasks]


def cross_run_board(runs: Sequence[Run]) -> CrossRunBoard:
    """The quality board over the runs' matched arms: each arm's rate over the tasks it was
    scored on (pooled over its runs) with its Wilson interval, and a rank from paired verdicts,
    one per pair of arms on the tasks both were scored on: 1 + the arms significantly better in
    theirs. An arm with no scored task is listed, unranked. Two queries, whatever the runs'
    sizes."""
    ordered = in_time_order(runs)
    arms = match_arms(ordered)
    pooled = pooled_task_scores(arms)
    minimum = low_sample_min()
    entries = [_entry(arm, per_task, minimum) for arm, per_task in zip(arms, pooled, strict=True)]
    scored = [index for index, per_task in enumerate(pooled) if per_task]
    verdicts = pairwise_verdicts({index: _shares(pooled[index]) for index in scored}, seed=ordered[-1].seed)
    for index, rank in paired_ranks(scored, verdicts).items():
        entries[index].rank = rank
    order = sorted(range(len(arms)), key=lambda i: _board_order(entries[i], i))
    metric, verb = quality_metric(ordered[0])
    place = {index: position for position, index in enumerate(order)}
    pairs = []
    for (a, b), verdict in verdicts.items():
        first, second = (a, b) if place[a] < place[b] else (b, a)
        oriented = verdict if first == a else verdict.flipped()
        sentence = oriented.sentence(arms[first].label, arms[second].label, verb)
        pairs.append((place[first], place[second], CrossRunPair(arms[first], arms[second], oriented, sentence)))
    return CrossRunBoard(
        ordered, metric, [entries[i] for i in order], [pair for *_, pair in sorted(pairs, key=lambda p: p[:2])]
    )


def _board_order(entry: CrossRunEntry, index: int) -> tuple:
    unranked = entry.rank is None
    return (unranked, entry.rank or 0, -(entry.rate or 0), not entry.tasks, index)


def _entry(arm: MatchedArm, per_task: TaskScores, minimum: int) -> CrossRunEntry:
    successes = sum(s for s, _ in per_task.values())
    scored = sum(n for _, n in per_task.values())
    return CrossRunEntry(
        arm=arm,
        tasks=len(per_task),
        scored=scored,
        successes=successes,
        rate=successes / scored if scored else None,
        interval=wilson_interval(successes, scored),
        low_sample=len(per_task) < minimum,
    )


TaskScores = dict[int, tuple[int, int]]  # task id -> (successes, scored)


def _task_scores(runs: Sequence[Run], arms: Sequence[MatchedArm], tasks: list[int] | None) -> dict:
    """(matched arm index, run id) -> TaskScores, from one query over the task summaries (two
    arms of one run that match are one arm: their attempts add up). The rows are the table's
    own columns, each arm matched here from a dict: a matched-arm CASE in the query costs
    Django a converter call per row, and over 20 runs' 320,000 rows that was half the time."""
    if not arms:
        return {}
    matched_arm = {arm_id: index for index, arm in enumerate(arms) for arm_id in arm.arm_ids}
    summaries = TaskSummary.objects.filter(run__in=runs)
    if tasks is not None:
        summaries = summaries.filter(task_id__in=tasks)
    scores: dict[tuple[int, int], TaskScores] = {}
    rows = summaries.values_list("arm_id", "run_id", "task_id", "successes", "scored").order_by()
    for arm_id, run_id, task_id, successes, scored in rows:
        per_task = scores.setdefault((matched_arm[arm_id], run_id), {})
        before = per_task.get(task_id, (0, 0))
        per_task[task_id] = (before[0] + successes, before[1] + scored)
    return scores


def pooled_task_scores(arms: Sequence[MatchedArm]) -> list[TaskScores]:
    """Each matched arm's TaskScores over all its runs (its arm_ids: match_arms' rows of the
    runs), summed in the database: one row per arm and task comes back (8 arms on 2,000
    tasks: 16,000), not one per run as well (20 runs: 320,000), which cost the board most of
    its time reading them into Python.

    One GROUP BY task per matched arm over its arms' rows, all in one UNION ALL statement:
    one GROUP BY of every (matched arm, task) keeps 16,000 groups in a hash table that no
    longer fits the CPU's cache, and with the CASE that matched each row it cost Postgres
    about three times the raw GROUP BY arm over the same rows; 2,000 groups at a time cost
    it about a third more than that raw query (and Postgres may run the arms' parts in
    parallel). The rows are read from the cursor: through a queryset Django calls int() on
    each sum, and that was another sixth of the time."""
    pooled: list[TaskScores] = [{} for _ in arms]
    if not arms:
        return pooled
    selects: list[str] = []
    params: list[Any] = []
    for index, arm in enumerate(arms):
        sums = (
            TaskSummary.objects.filter(arm_id__in=arm.arm_ids)
            .values("task_id")
            .annotate(matched=Value(index, IntegerField()), successes_=Sum("successes"), scored_=Sum("scored"))
            .values_list("matched", "task_id", "successes_", "scored_")
            .order_by()
        )
        select, select_params = sums.query.sql_with_params()
        selects.append(select)
        params.extend(select_params)
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        for matched, task_id, successes, scored in cursor.fetchall():
            pooled[matched][task_id] = (successes, scored)
    return pooled


def _shares(scores: TaskScores) -> dict[int, float]:
    return {task: successes / scored for task, (successes, scored) in scores.items()}


@dataclass(frozen=True)
class TrendPoint:
    run: Run
    scored: int
    successes: int
    rate: float
    interval: tuple[float, float] | None
    previous_run: Run | None  # the arm's previous run, if any
    against_previous: PairedVerdict | None  # this run against the previous one
    sentence: str = ""

    @property
    def regressed(self) -> bool:
        """Significantly worse than the arm's previous run on the tasks both scored."""
        verdict = self.against_previous
        if verdict is None or verdict.mean_difference is None:
            return False
        return verdict.significant and verdict.mean_difference < 0


@dataclass(frozen=True)
class ArmTrend:
    arm: MatchedArm
    points: list[TrendPoint]  # in time order, one per run the arm was scored in

    @property
    def regressions(self) -> int:
        return sum(point.regressed for point in self.points)


def arm_trends(runs: Sequence[Run]) -> list[ArmTrend]:
    """Each matched arm's rate run by run on the tasks it was scored on, and a paired verdict of
    each run against the arm's previous one on the tasks both scored (so a model version that
    got worse is flagged). A run where the arm scored nothing is left out of its line."""
    ordered = in_time_order(runs)
    arms = match_arms(ordered)
    scores = _task_scores(ordered, arms, None)
    _, verb = quality_metric(ordered[0])
    # Each arm's runs with scores, in time order; every run but an arm's first is then
    # compared with the one before it, all the verdicts in one batch.
    series = [
        [(run, scores[index, run.pk]) for run in ordered if scores.get((index, run.pk))] for index in range(len(arms))
    ]
    steps = [(later, earlier) for runs_of_arm in series for earlier, later in itertools.pairwise(runs_of_arm)]
    verdicts = iter(paired_verdicts([(_shares(later[1]), _shares(earlier[1])) for later, earlier in steps]))
    trends = []
    for arm, runs_of_arm in zip(arms, series, strict=True):
        points: list[TrendPoint] = []
        for position, (run, per_task) in enumerate(runs_of_arm):
            successes = sum(s for s, _ in per_task.values())
            scored = sum(n for _, n in per_task.values())
            previous = runs_of_arm[position - 1][0] if position else None
            verdict = next(verdicts) if previous else None
            sentence = verdict.sentence(_in_run(arm, run), _in_run(arm, previous), verb) if verdict and previous else ""
            points.append(
                TrendPoint(
                    run=run,
                    scored=scored,
                    successes=successes,
                    rate=successes / scored,
                    interval=wilson_interval(successes, scored),
                    previous_run=previous,
                    against_previous=verdict,
                    sentence=sentence,
                )
            )
        trends.append(ArmTrend(arm, points))
    return trends


def _in_run(arm: MatchedArm, run: Run) -> str:
    return f"{arm.label} in run {str(run.code)[:8]}"


@dataclass(frozen=True)
class FlippedTask:
    task: TaskInstance
    score_a: float  # share of the arm's scored attempts at the task that succeeded, in run A
    score_b: float


@dataclass(frozen=True)
class VersusArm:
    arm: MatchedArm
    verdict: PairedVerdict  # A against B
    sentence: str
    better_in_a: list[FlippedTask]  # resolved in A and not in B (or more often, with repetitions)
    better_in_b: list[FlippedTask]


@dataclass(frozen=True)
class RunVersus:
    a: Run
    b: Run
    metric: str
    arms: list[VersusArm]  # the arms both runs have
    only_in_a: list[MatchedArm]
    only_in_b: list[MatchedArm]


def run_versus(a: Run, b: Run) -> RunVersus:
    """Run A against run B (one dataset), arm by matched arm: the paired verdict on the tasks
    both scored, and which of those tasks flipped either way. Three queries."""
    arms = match_arms([a, b])
    scores = _task_scores([a, b], arms, None)
    metric, verb = quality_metric(a)
    both = [
        (arm, _shares(scores.get((index, a.pk), {})), _shares(scores.get((index, b.pk), {})))
        for index, arm in enumerate(arms)
        if a.pk in arm.run_ids and b.pk in arm.run_ids
    ]
    changed = {task for _, in_a, in_b in both for task in in_a.keys() & in_b.keys() if in_a[task] != in_b[task]}
    tasks = TaskInstance.objects.only("code", "external_id", "title", "position").in_bulk(changed)
    compared = []
    for arm, in_a, in_b in both:
        verdict = paired_verdict(in_a, in_b, seed=b.seed)
        flips = sorted(
            (FlippedTask(tasks[task], in_a[task], in_b[task]) for task in in_a.keys() & in_b.keys() if task in changed),
            key=lambda flip: (flip.task.position, flip.task.external_id),
        )
        compared.append(
            VersusArm(
                arm,
                verdict,
                verdict.sentence(_in_run(arm, a), _in_run(arm, b), verb),
                better_in_a=[flip for flip in flips if flip.score_a > flip.score_b],
                better_in_b=[flip for flip in flips if flip.score_b > flip.score_a],
            )
        )
    return RunVersus(
        a=a,
        b=b,
        metric=metric,
        arms=compared,
        only_in_a=[arm for arm in arms if b.pk not in arm.run_ids],
        only_in_b=[arm for arm in arms if a.pk not in arm.run_ids],
    )
