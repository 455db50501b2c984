"""A percentile aggregate that runs in the database on both Postgres and SQLite."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.backends.signals import connection_created
from django.db.models import Aggregate, FloatField, Func, Value


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


def register_sqlite_percentile(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate("prbench_percentile", 2, _SqlitePercentile)


connection_created.connect(register_sqlite_percentile)
