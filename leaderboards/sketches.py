"""Mergeable quantile sketches: the latency, first-token and tokens/s percentiles of a run's
summaries, kept as DDSketch's logarithmic buckets (Masson, Rim and Lee, VLDB 2019).

A positive value ``x`` falls in bucket ``ceil(ln x / ln g)``, g = (1 + a) / (1 - a); every
value of bucket ``i`` lies in (g^(i-1), g^i], and the bucket's middle 2g^i / (g + 1) is within
a of each of them. A sketch is ``{bucket: count}``: two of them merge by adding their counts,
so recording folds a chunk's sketch into the arm's, and a rebuild counts the same buckets with
one GROUP BY. The bucket is computed in SQL for both, so a value lands in the same bucket
whichever path counted it.

Stored (SketchField) on Postgres as an integer[] whose subscripts are the buckets and whose
elements are their counts (NULL: none): a fold adds a chunk's few buckets in place
(prbench_add_buckets, leaderboards/migrations/0009), where rewriting a JSON object of hundreds
of keys cost most of a fold's CPU. A few hundred buckets take a few hundred 4-byte counts
and a bit each, so an arm's row keeps its sketches inline. On SQLite a JSON object, as before.

Error bound: a quantile read from a sketch is within RELATIVE_ACCURACY (1%) of the exact one
(``percentile_cont``'s linear interpolation between the two order statistics around the rank:
each is read within 1%, and so is any mix of two positive values). Values below SMALLEST
(and zero) are counted as zero, exactly. A latency spread from 1 ms to 10 minutes fills at
most 665 buckets.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from django.db import models
from django.db.models import Case, F, FloatField, IntegerField, Q, Value, When
from django.db.models.functions import Cast, Ceil, Ln

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
LN_GAMMA = math.log(GAMMA)
SMALLEST = 1e-6
# Below any bucket of a value >= SMALLEST (ceil(ln(1e-6) / ln g) = -690), and close to them: on
# Postgres a sketch's array spans every subscript from its lowest bucket to its highest.
ZERO_BUCKET = -700


def bucket(field: str, counted: Q) -> Case:
    """The SQL bucket of ``field`` for the rows ``counted`` selects (NULL elsewhere, or without a value)."""
    value = Cast(F(field), FloatField())
    return Case(
        When(counted & Q(**{f"{field}__gte": SMALLEST}), then=Cast(Ceil(Ln(value) / Value(LN_GAMMA)), IntegerField())),
        When(counted & Q(**{f"{field}__isnull": False}), then=Value(ZERO_BUCKET)),
        output_field=IntegerField(),
    )


def count_buckets(buckets: Iterable[int | None]) -> dict[str, int]:
    """A sketch from the buckets of single values (NULLs skipped), keyed as JSON keys are."""
    sketch: dict[str, int] = {}
    for index in buckets:
        if index is not None:
            key = str(index)
            sketch[key] = sketch.get(key, 0) + 1
    return sketch


def merge(total: Mapping[str, int], more: Mapping[str, int], sign: int = 1) -> dict[str, int]:
    """Counts added key by key (or subtracted, ``sign`` -1), keys left at zero dropped: as
    SQL's prbench_add_counts does, so a merged sketch equals the one counted at once."""
    merged = dict(total)
    for key, count in more.items():
        merged[key] = merged.get(key, 0) + sign * count
    return {key: count for key, count in merged.items() if count}


def _middle(index: int, whole: bool = False) -> float:
    """The bucket's representative value. ``whole``: the values counted are whole numbers
    (milliseconds), and a bucket narrower than 1 (every one below ~50) holds at most one: that
    one, exactly, rather than a middle a gate's threshold could fall just short of."""
    if index == ZERO_BUCKET:
        return 0.0
    low, high = GAMMA ** (index - 1), GAMMA**index
    if whole and math.floor(high) - math.floor(low) == 1:  # the one whole number in (low, high]
        return float(math.floor(high))
    return 2 * high / (GAMMA + 1)


def quantiles(sketch: Mapping[str, Any] | None, fractions: Iterable[float], whole: bool = False) -> list[float] | None:
    """The sketch's quantiles at these fractions (0..1), interpolated between order statistics
    as percentile_cont does; None for an empty sketch. ``whole``: see _middle."""
    items = sorted((int(key), count) for key, count in (sketch or {}).items() if count > 0)
    if not items:
        return None
    indices, counts = zip(*items, strict=True)
    ends = np.cumsum(counts)  # the 0-based rank after each bucket's last value
    middles = np.array([_middle(index, whole) for index in indices])
    ranks = np.asarray(list(fractions), dtype=float) * (ends[-1] - 1)
    low, high = np.floor(ranks), np.ceil(ranks)
    below, above = middles[np.searchsorted(ends, low, side="right")], middles[np.searchsorted(ends, high, side="right")]
    return [float(value) for value in below + (ranks - low) * (above - below)]


def quantile(sketch: Mapping[str, Any] | None, fraction: float, whole: bool = False) -> float | None:
    values = quantiles(sketch, [fraction], whole)
    return None if values is None else values[0]


class SketchField(models.Field):
    """A sketch, ``{bucket: count}`` in Python (keys as JSON keys are, strings). On Postgres an
    integer[] subscripted by bucket (read as text, which keeps its bounds: "[-3:-1]={1,NULL,2}");
    on SQLite a JSON object."""

    description = "Counts per sketch bucket"

    def db_type(self, connection: Any) -> str:
        return "integer[]" if connection.vendor == "postgresql" else "text"

    def select_format(self, compiler: Any, sql: str, params: Any) -> tuple[str, Any]:
        if compiler.connection.vendor == "postgresql":
            return f"({sql})::text", params
        return sql, params

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> dict[str, int] | None:
        if value is None:
            return None
        if connection.vendor == "postgresql":
            return from_array_text(value)
        return json.loads(value)

    def to_python(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def value_to_string(self, obj: Any) -> str:  # serialized (dumpdata) as JSON, as a JSONField is
        return json.dumps(self.value_from_object(obj))

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> str | None:
        if value is None:
            return None
        if connection.vendor == "postgresql":
            return as_array_text(value)
        return json.dumps(value)


def as_array_text(sketch: Mapping[str, int]) -> str:
    """The sketch as Postgres' text of an integer[] subscripted by bucket ("{}" when empty)."""
    counts = {int(key): count for key, count in sketch.items() if count}
    if not counts:
        return "{}"
    low, high = min(counts), max(counts)
    elements = ",".join(str(counts[index]) if index in counts else "NULL" for index in range(low, high + 1))
    return f"[{low}:{high}]={{{elements}}}"


def from_array_text(text: str) -> dict[str, int]:
    """as_array_text's sketch back (a lower bound of 1 is written without its bounds)."""
    low = 1
    if text.startswith("["):
        bounds, text = text.split("=", 1)
        low = int(bounds[1:].split(":", 1)[0])
    elements = text[1:-1]
    if not elements:
        return {}
    return {
        str(low + offset): int(element)
        for offset, element in enumerate(elements.split(","))
        if element != "NULL" and int(element)
    }
