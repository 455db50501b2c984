"""Percentile aggregates that run in the database on both Postgres and SQLite, and the rows' versions."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from django.db.backends.signals import connection_created
from django.db.models import (
    Aggregate,
    BigIntegerField,
    Expression,
    Field,
    FloatField,
    Func,
    IntegerField,
    JSONField,
    Value,
)


class Percentile(Aggregate):
    """Continuous percentile (linear interpolation), like Postgres' ``percentile_cont``."""

    function = "percentile_cont"
    name = "Percentile"
    output_field = FloatField()
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Any, fraction: float, **extra: Any):
        if not 0 <= fraction <= 1:
            raise ValueError("fraction must be between 0 and 1")
        super().__init__(expression, **extra)
        self.fraction = fraction

    def as_sql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, fraction=repr(float(self.fraction)), **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):
        # SQLite has no ordered-set aggregates; register_sqlite_percentile provides one.
        expression = self.get_source_expressions()[0]
        call = Func(expression, Value(float(self.fraction)), function="prbench_percentile", output_field=FloatField())
        return call.as_sql(compiler, connection)


class Quantiles(Aggregate):
    """Every percentile from 0 to 100 (101 values, ``percentile_cont``'s interpolation) of
    the expression, as a JSON list, or None without a value: one sort gives the median, the
    95th percentile and the order statistics an interval of the median needs."""

    function = "percentile_cont"
    name = "Quantiles"
    output_field = JSONField()
    template = "to_jsonb(%(function)s(%(fractions)s) WITHIN GROUP (ORDER BY %(expressions)s))"
    STEPS = 100

    def as_sql(self, compiler, connection, **extra_context):
        steps = ", ".join(repr(step / self.STEPS) for step in range(self.STEPS + 1))
        fractions = f"ARRAY[{steps}]::float8[]"
        return super().as_sql(compiler, connection, fractions=fractions, **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):
        expression = self.get_source_expressions()[0]
        call = Func(expression, Value(self.STEPS), function="prbench_quantiles", output_field=JSONField())
        return call.as_sql(compiler, connection)


class Collect(Aggregate):
    """The group's values as a JSON list (NULLs included): what a chunk of a few dozen
    attempts hands Python to count, where a GROUP BY per value would be another query."""

    function = "array_agg"
    name = "Collect"
    output_field = JSONField()
    template = "to_jsonb(%(function)s(%(expressions)s))"

    def as_sqlite(self, compiler, connection, **extra_context):
        template = "%(function)s(%(expressions)s)"
        return super().as_sql(compiler, connection, function="json_group_array", template=template)


class BucketCounts(Aggregate):
    """Postgres: the group's sketch buckets counted (NULLs skipped) as a sketch's integer[]
    (leaderboards/sketches.py), prbench_count_buckets of leaderboards/migrations/0009."""

    function = "array_agg"
    name = "BucketCounts"
    template = "prbench_count_buckets(%(function)s(%(expressions)s))"

    def __init__(self, expression: Any, **extra: Any):
        # Read by SQL alone (summaries._fold_sql): as a SketchField it would be selected as text.
        super().__init__(expression, output_field=Field(), **extra)


class WidthBucket(Func):
    """Which of the buckets split at ``edges`` (whole numbers, ascending) the value falls in: 0
    below the first edge, i from edges[i - 1] up to edges[i], len(edges) from the last edge up.
    Postgres' width_bucket(value, thresholds), a binary search; elsewhere a CASE per edge."""

    output_field = IntegerField()

    def __init__(self, expression: Any, edges: tuple[int, ...], **extra: Any):
        super().__init__(expression, **extra)
        self.edges = tuple(int(edge) for edge in edges)

    def as_postgresql(self, compiler, connection, **extra_context):
        value, params = compiler.compile(self.get_source_expressions()[0])
        return f"width_bucket({value}, ARRAY[{', '.join(map(str, self.edges))}])", params

    def as_sql(self, compiler, connection, **extra_context):
        value, params = compiler.compile(self.get_source_expressions()[0])
        whens = " ".join(f"WHEN {value} < {edge} THEN {index}" for index, edge in enumerate(self.edges))
        return f"CASE {whens} ELSE {len(self.edges)} END", list(params) * len(self.edges)


class _SqlitePercentile:
    def __init__(self) -> None:
        self.values: list[float] = []
        self.fraction = 0.5

    def step(self, value: float | None, fraction: float) -> None:
        self.fraction = fraction
        if value is not None:
            self.values.append(value)

    def finalize(self) -> float | None:
        if not self.values:
            return None
        return float(np.percentile(self.values, self.fraction * 100, method="linear"))


class _SqliteQuantiles:
    def __init__(self) -> None:
        self.values: list[float] = []
        self.steps = Quantiles.STEPS

    def step(self, value: float | None, steps: int) -> None:
        self.steps = steps
        if value is not None:
            self.values.append(value)

    def finalize(self) -> str | None:
        if not self.values:
            return None
        fractions = np.arange(self.steps + 1) / self.steps
        return json.dumps(np.percentile(self.values, fractions * 100, method="linear").tolist())


def add_counts(total: str | None, more: str | None) -> str:
    """SQLite's prbench_add_counts (Postgres': migration 0002 of leaderboards): two JSON
    objects of counts added key by key, keys left at zero dropped."""
    merged = dict(json.loads(total or "{}"))
    for key, count in json.loads(more or "{}").items():
        merged[key] = merged.get(key, 0) + count
    return json.dumps({key: count for key, count in merged.items() if count})


def add_lists(total: str | None, more: str | None) -> str:
    """SQLite's prbench_add_lists: two JSON lists of counts added place by place."""
    first, second = json.loads(total or "[]"), json.loads(more or "[]")
    width = max(len(first), len(second))
    first, second = first + [0] * (width - len(first)), second + [0] * (width - len(second))
    return json.dumps([a + b for a, b in zip(first, second, strict=True)])


def register_sqlite_percentile(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate("prbench_percentile", 2, _SqlitePercentile)
        connection.connection.create_aggregate("prbench_quantiles", 2, _SqliteQuantiles)
        connection.connection.create_function("prbench_add_counts", 2, add_counts, deterministic=True)
        connection.connection.create_function("prbench_add_lists", 2, add_lists, deterministic=True)


connection_created.connect(register_sqlite_percentile)


class RowVersion(Expression):
    """The version of the row as the statement reads it: on Postgres the id of the transaction
    that last wrote it (the ``xmin`` system column), which every UPDATE changes, committed in
    whatever order. Summed with the rows' count, it tells whether a set of rows is still the
    one a summary was built from. SQLite has no row versions: 0, and only the count is told."""

    output_field = BigIntegerField()

    def as_sql(self, compiler, connection, **extra_context):
        table = compiler.quote_name_unless_alias(compiler.query.get_initial_alias())
        return f"{table}.xmin::text::bigint", []

    def as_sqlite(self, compiler, connection, **extra_context):
        return "0", []
