"""Which tasks a run uses and in which order its attempts execute, from the seed alone."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from experiments.models import Allocation, SampleStrategy

T = TypeVar("T")


def sample_tasks(
    tasks: Sequence[T],
    size: int | None,
    strategy: str,
    seed: int,
    stratum: Callable[[T], Hashable] | None = None,
    allocation: str = Allocation.PROPORTIONAL,
) -> list[T]:
    """``tasks`` must already be in dataset order; the sample keeps that order. A stratified
    sample needs ``stratum``, each task's stratum (its category, difficulty or both)."""
    if size is None or size >= len(tasks):
        return list(tasks)
    if strategy == SampleStrategy.FIRST:
        return list(tasks[:size])
    if strategy == SampleStrategy.STRATIFIED:
        assert stratum is not None, "a stratified sample needs each task's stratum"
        return _stratified(tasks, size, seed, stratum, allocation)
    chosen = sorted(random.Random(seed).sample(range(len(tasks)), size))
    return [tasks[i] for i in chosen]


def _stratified(tasks: Sequence[T], size: int, seed: int, stratum: Callable[[T], Hashable], allocation: str) -> list[T]:
    """Each stratum's quota (``quotas``), drawn at random within it, seeded: the same seed
    gives the same sample, whatever order the strata come in."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, task in enumerate(tasks):
        members[stratum(task)].append(index)
    strata = sorted(members, key=repr)  # a stable order, whatever the strata are
    sizes = [len(members[key]) for key in strata]
    rng = random.Random(f"stratified:{seed}")
    chosen: list[int] = []
    for key, quota in zip(strata, quotas(sizes, size, allocation), strict=True):
        chosen += rng.sample(members[key], quota)
    return [tasks[i] for i in sorted(chosen)]


def quotas(sizes: list[int], total: int, allocation: str) -> list[int]:
    """How many tasks each stratum gives to a sample of ``total`` (at most the sum of
    ``sizes``). Proportional: each stratum's share of ``total``, the remainders going to the
    largest fractions (Hamilton's method), so every stratum keeps its share to within one.
    Equal: the same number from each, a small stratum giving all it has and the rest shared
    among the others; what cannot be shared evenly goes to the strata first in order."""
    if allocation == Allocation.EQUAL:
        return _equal(sizes, total)
    whole = sum(sizes)
    exact = [size * total / whole for size in sizes]
    given = [int(share) for share in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (given[i] - exact[i], i))
    for i in by_remainder[: total - sum(given)]:
        given[i] += 1
    return given


def _equal(sizes: list[int], total: int) -> list[int]:
    given = [0] * len(sizes)
    left = total
    while left:
        open_strata = [i for i, size in enumerate(sizes) if given[i] < size]
        share = max(1, left // len(open_strata))
        for i in open_strata:
            take = min(share, sizes[i] - given[i], left)
            given[i] += take
            left -= take
            if not left:
                break
    return given


def attempt_order(cells: list[T], seed: int) -> list[T]:
    """Shuffle (task, arm, repetition) cells so arms interleave: a provider's slow hour
    then hurts every arm alike instead of whichever arm happened to run in it."""
    ordered = list(cells)
    random.Random(f"order:{seed}").shuffle(ordered)
    return ordered
