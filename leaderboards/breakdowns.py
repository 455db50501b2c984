"""How each arm did beyond one quality figure: by the tasks' category and difficulty, how
consistent its repetitions were, and how well its stated confidence matched its accuracy.

Every figure counts what the model did (``MODEL_SCORED``): an infrastructure failure says
nothing about it, and an answer still waiting for its verdict is not counted yet. The
counting is SQL; only the per-arm arithmetic on its totals is Python.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.db.models import Avg, Case, Count, ExpressionWrapper, F, FloatField, IntegerField, Q, Value, When
from django.db.models.functions import Floor, Least

from experiments.models import Attempt, Run, RunArm
from leaderboards.aggregation import MODEL_SCORED
from leaderboards.stats import wilson_interval

CALIBRATION_BINS = 10  # expected calibration error over confidence deciles


@dataclass(frozen=True)
class GroupScore:
    scored: int
    correct: int
    interval: tuple[float, float] | None  # Wilson 95%

    @property
    def rate(self) -> float | None:
        return self.correct / self.scored if self.scored else None


@dataclass(frozen=True)
class GroupTable:
    """Each group's (category's, difficulty's) score for each arm, groups in name order."""

    field: str  # "category" or "difficulty"
    arms: list[str]
    groups: list[tuple[str, list[GroupScore | None]]]  # None: the arm had no scored answer there


@dataclass(frozen=True)
class Consistency:
    """Of the tasks an arm answered more than once, the share whose answers all agreed (all
    right or all wrong), and Fleiss' kappa of that agreement, corrected for chance."""

    arm: str
    tasks: int  # tasks with at least two scored repetitions
    agreeing: int
    kappa: float | None  # None: undefined (every answer alike) or too few tasks

    @property
    def share(self) -> float | None:
        return self.agreeing / self.tasks if self.tasks else None


@dataclass(frozen=True)
class Calibration:
    """Of an arm's scored answers that stated a confidence: how far it was from being right."""

    arm: str
    answers: int
    brier: float | None  # mean squared difference between confidence and correctness
    ece: float | None  # expected calibration error over confidence deciles


def _scored(run: Run):
    return Attempt.objects.filter(MODEL_SCORED, run=run)


def group_table(run: Run, field: str) -> GroupTable | None:
    """The arms' scores by the tasks' ``field``; None when the run's tasks have none."""
    rows = (
        _scored(run)
        .exclude(**{f"task__{field}": ""})
        .values("arm__label", f"task__{field}")
        .annotate(scored=Count("pk"), correct=Count("pk", filter=Q(resolved=True)))
    )
    cells: dict[str, dict[str, GroupScore]] = defaultdict(dict)
    for row in rows:
        scored, correct = row["scored"], row["correct"]
        cells[row[f"task__{field}"]][row["arm__label"]] = GroupScore(scored, correct, wilson_interval(correct, scored))
    if not cells:
        return None
    arms = list(RunArm.objects.filter(run=run).order_by("position", "pk").values_list("label", flat=True))
    groups = [(group, [cells[group].get(arm) for arm in arms]) for group in sorted(cells)]
    return GroupTable(field, arms, groups)


def consistency(run: Run) -> list[Consistency]:
    """Each arm's agreement across repetitions; empty for a run of one repetition."""
    per_task = (
        _scored(run)
        .values("arm__label", "task_id")
        .annotate(answers=Count("pk"), correct=Count("pk", filter=Q(resolved=True)))
        .filter(answers__gte=2)
        .values_list("arm__label", "answers", "correct")
    )
    by_arm: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for arm, answers, correct in per_task:
        by_arm[arm].append((answers, correct))
    labels = RunArm.objects.filter(run=run).order_by("position", "pk").values_list("label", flat=True)
    return [
        Consistency(
            arm,
            tasks=len(by_arm[arm]),
            agreeing=sum(correct in (0, answers) for answers, correct in by_arm[arm]),
            kappa=fleiss_kappa(by_arm[arm]),
        )
        for arm in labels
        if by_arm[arm]
    ]


def fleiss_kappa(tasks: list[tuple[int, int]]) -> float | None:
    """Fleiss' kappa for two categories (right, wrong) from each task's (answers, right ones).
    Tasks with fewer answers than most are left out (kappa needs as many ratings for each);
    None when fewer than two tasks remain or every answer was alike (chance agreement 1)."""
    counts = [answers for answers, _ in tasks]
    raters = max(set(counts), key=lambda n: (counts.count(n), n))
    table = np.array([(right, answers - right) for answers, right in tasks if answers == raters], dtype=float)
    if len(table) < 2:
        return None
    shares = table.sum(axis=0) / table.sum()
    chance = float((shares**2).sum())
    if chance >= 1:
        return None
    observed = float(((table**2).sum(axis=1) - raters).mean() / (raters * (raters - 1)))
    return (observed - chance) / (1 - chance)


def calibration(run: Run) -> list[Calibration]:
    """Each arm's calibration over the answers that stated a confidence (only templates that
    ask for one); empty when none did."""
    stated = _scored(run).filter(confidence__isnull=False)
    right = Case(When(resolved=True, then=Value(1.0)), default=Value(0.0), output_field=FloatField())
    squared = ExpressionWrapper((F("confidence") - right) * (F("confidence") - right), output_field=FloatField())
    totals = {
        row["arm__label"]: row for row in stated.values("arm__label").annotate(answers=Count("pk"), brier=Avg(squared))
    }
    decile = Least(Floor(F("confidence") * CALIBRATION_BINS), Value(CALIBRATION_BINS - 1), output_field=IntegerField())
    bins: dict[str, float] = defaultdict(float)
    for row in (
        stated.annotate(bin=decile)
        .values("arm__label", "bin")
        .annotate(answers=Count("pk"), confidence=Avg("confidence"), accuracy=Avg(right))
    ):
        total = totals[row["arm__label"]]["answers"]
        bins[row["arm__label"]] += row["answers"] / total * abs(row["accuracy"] - row["confidence"])
    labels = RunArm.objects.filter(run=run).order_by("position", "pk").values_list("label", flat=True)
    return [
        Calibration(arm, totals[arm]["answers"], totals[arm]["brier"], bins[arm]) for arm in labels if arm in totals
    ]


def breakdowns(run: Run) -> dict:
    """What the run page shows under its boards (each part only when the run has it)."""
    tables = [group_table(run, "category"), group_table(run, "difficulty")]
    return {
        "tables": [table for table in tables if table is not None],
        "consistency": consistency(run),
        "calibration": calibration(run),
    }
