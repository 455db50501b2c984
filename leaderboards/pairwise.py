"""Is arm A better than arm B? Paired verdicts on the tasks both were scored on, and
Bradley-Terry ratings over all arms, from a run's task summaries (never its attempts)."""

from __future__ import annotations

from dataclasses import dataclass

from experiments.models import Run, RunArm
from leaderboards.boards import quality_metric
from leaderboards.models import TaskSummary
from leaderboards.stats import ArmRating, PairedVerdict, bradley_terry, ci_aware_ranks, pairwise_verdicts

ArmKey = tuple[int, int]  # (position, id): verdicts come keyed in the run's arm order


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    verdict: PairedVerdict  # A against B
    sentence: str


@dataclass(frozen=True)
class Cell:
    """Row arm against column arm: the share of their shared tasks the row arm won, a tie
    counting half; None on the diagonal and without a shared task."""

    win_rate: float | None
    shared: int
    significant: bool


@dataclass(frozen=True)
class Rated:
    label: str
    rating: ArmRating | None
    rank: int | None


@dataclass(frozen=True)
class RunPairwise:
    labels: list[str]
    pairs: list[Pair]
    matrix: list[list[Cell]]  # matrix[i][j]: arm i against arm j
    ratings: list[Rated]  # best first, unrated arms last
    metric: str


def run_pairwise(run: Run) -> RunPairwise:
    """Every pair of the run's arms (one query for the scores). Each arm's score on a task is
    its share of successes over its scored attempts there (repetitions averaged)."""
    arms = list(RunArm.objects.filter(run=run).order_by("position", "pk"))
    keys: dict[int, ArmKey] = {arm.pk: (arm.position, arm.pk) for arm in arms}
    labels = {keys[arm.pk]: arm.shown_label for arm in arms}
    scores: dict[ArmKey, dict[int, float]] = {key: {} for key in keys.values()}
    for arm_id, task_id, scored, successes in TaskSummary.objects.filter(run=run, scored__gt=0).values_list(
        "arm_id", "task_id", "scored", "successes"
    ):
        scores[keys[arm_id]][task_id] = successes / scored
    metric, verb = quality_metric(run)
    verdicts = pairwise_verdicts(scores, seed=run.seed)
    ordered = sorted(scores)
    pairs = [Pair(labels[a], labels[b], v, v.sentence(labels[a], labels[b], verb)) for (a, b), v in verdicts.items()]
    return RunPairwise(
        labels=[labels[key] for key in ordered],
        pairs=pairs,
        matrix=[[_cell(verdicts, row, column) for column in ordered] for row in ordered],
        ratings=_ratings(scores, labels, run.seed),
        metric=metric,
    )


def _cell(verdicts: dict[tuple[ArmKey, ArmKey], PairedVerdict], row: ArmKey, column: ArmKey) -> Cell:
    if row == column:
        return Cell(None, 0, False)
    verdict = verdicts[(row, column)] if (row, column) in verdicts else verdicts[(column, row)].flipped()
    if not verdict.shared_tasks:
        return Cell(None, 0, False)
    win_rate = (verdict.wins + verdict.ties / 2) / verdict.shared_tasks
    return Cell(win_rate, verdict.shared_tasks, verdict.significant)


def _ratings(scores: dict[ArmKey, dict[int, float]], labels: dict[ArmKey, str], seed: int) -> list[Rated]:
    ratings = bradley_terry(scores, seed=seed)
    intervals = {
        key: (rating.ci_low, rating.ci_high, rating.rating) if rating is not None else None
        for key, rating in ratings.items()
    }
    ranks = ci_aware_ranks(intervals)
    return [Rated(labels[key], ratings[key], rank) for key, rank in ranks.items()]
