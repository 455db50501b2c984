"""pass@k over a run's repetitions: the chance that at least one of k answers of an arm to a
task passes, estimated without bias from the n answers it gave, c of which passed (Chen et
al. 2021, "Evaluating Large Language Models Trained on Code"): 1 - C(n-c, k) / C(n, k),
averaged over tasks. Drawing k of the n answers without replacement, it is the share of
draws holding a passing one; the naive 1 - (1 - c/n)^k is biased low.

The counts per arm and task are aggregated in SQL; only those reach Python. An answer is
one the model had its turn at (a model success or failure): an infrastructure failure is no
sample, so a task whose repetitions the platform failed has a smaller n, and a task with
fewer than k answers is left out of pass@k (the table says over how many tasks each is).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from leaderboards.aggregation import MODEL_SCORED, SUCCESS

# The k the literature reports (HumanEval: 1, 10, 100), those at most the run's repetitions,
# and the repetitions themselves (pass@n: any answer passed).
STANDARD_KS = (1, 5, 10, 25, 50, 100)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate from one task's ``n`` answers of which ``c`` passed."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@{k} needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c})")
    if n - c < k:  # every draw of k holds a passing answer
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def ks_for(repetitions: int) -> list[int]:
    ks = [k for k in STANDARD_KS if k <= repetitions]
    return ks if repetitions in ks or repetitions < 1 else [*ks, repetitions]


@dataclass(frozen=True)
class PassAtK:
    k: int
    value: float | None  # None: no task has k answers yet
    tasks: int  # the tasks averaged over: those with at least k answers


def mean_pass_at_k(counts: Iterable[tuple[int, int]], ks: Iterable[int]) -> list[PassAtK]:
    """pass@k for each k, averaged over the tasks' (n, c) counts; each distinct count is
    computed once (a run has few: n is at most its repetitions)."""
    distinct = Counter(counts)
    figures = []
    for k in ks:
        kept = {(n, c): tasks for (n, c), tasks in distinct.items() if n >= k}
        total = sum(kept.values())
        value = sum(pass_at_k(n, c, k) * tasks for (n, c), tasks in kept.items()) / total if total else None
        figures.append(PassAtK(k, value, total))
    return figures


def task_counts(attempts: QuerySet) -> QuerySet:
    """Per arm and task of these attempts: n, the answers the model had its turn at, and c,
    those that passed. One GROUP BY, however many repetitions."""
    return (
        attempts.filter(MODEL_SCORED)
        .values("arm_id", "task_id")
        .annotate(n=Count("id"), c=Count("id", filter=SUCCESS & Q(resolved=True)))
        .order_by()
    )


@dataclass(frozen=True)
class ArmPassAtK:
    label: str
    figures: list[PassAtK]


@dataclass(frozen=True)
class RunPassAtK:
    ks: list[int]
    arms: list[ArmPassAtK]


def run_pass_at_k(attempts: QuerySet, arms: Iterable[tuple[int, str]], repetitions: int) -> RunPassAtK:
    """pass@k of each arm (``arms``: id and label, in the order to show) over ``attempts``."""
    ks = ks_for(repetitions)
    by_arm: dict[int, list[tuple[int, int]]] = {}
    for row in task_counts(attempts):
        by_arm.setdefault(row["arm_id"], []).append((row["n"], row["c"]))
    return RunPassAtK(ks, [ArmPassAtK(label, mean_pass_at_k(by_arm.get(pk, []), ks)) for pk, label in arms])
