"""Which tasks a run uses and in which order its attempts execute, from the seed alone."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from experiments.models import SampleStrategy

T = TypeVar("T")


def sample_tasks(tasks: Sequence[T], size: int | None, strategy: str, seed: int) -> list[T]:
    """``tasks`` must already be in dataset order; the sample keeps that order."""
    if size is None or size >= len(tasks):
        return list(tasks)
    if strategy == SampleStrategy.FIRST:
        return list(tasks[:size])
    chosen = sorted(random.Random(seed).sample(range(len(tasks)), size))
    return [tasks[i] for i in chosen]


def attempt_order(cells: list[T], seed: int) -> list[T]:
    """Shuffle (task, arm, repetition) cells so arms interleave: a provider's slow hour
    then hurts every arm alike instead of whichever arm happened to run in it."""
    ordered = list(cells)
    random.Random(f"order:{seed}").shuffle(ordered)
    return ordered
