"""Helpers for sets of closed numeric intervals ``[start, end]``."""

from __future__ import annotations

from typing import Iterable, List, Tuple

__all__ = ["merge_intervals", "total_length", "contains"]

Interval = Tuple[float, float]


def merge_intervals(intervals: Iterable[Interval]) -> List[Interval]:
    """Merge overlapping or touching closed intervals.

    Each interval is a ``(start, end)`` pair with ``start <= end``. The
    result is sorted by start and contains no two intervals that share a
    point.

    >>> merge_intervals([(5, 7), (1, 2), (2, 4)])
    [(1, 4), (5, 7)]
    """
    merged: List[Interval] = []
    for start, end in sorted(intervals):
        if start > end:
            raise ValueError(f"invalid interval: ({start}, {end})")
        if merged and start < merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: Iterable[Interval]) -> float:
    """Return the total length covered by ``intervals``, counting overlaps once."""
    return sum(end - start for start, end in merge_intervals(intervals))


def contains(intervals: Iterable[Interval], point: float) -> bool:
    """Return ``True`` if ``point`` lies inside any of the closed ``intervals``."""
    return any(start <= point <= end for start, end in intervals)
