"""Seeding a large run for the bench scripts: one INSERT ... SELECT of generated attempts."""

from __future__ import annotations

import math


def attempt_insert(
    run_id: int, task_ids: list[int], arm_ids: list[int], attempts: int, attempt_values: dict[str, str]
) -> tuple[str, list]:
    """One INSERT ... SELECT over generate_series(first, last) (its last two parameters).
    Every other required column gets the model's default, so a column added later needs no
    change here."""
    from django.db import connection

    from experiments.models import Attempt

    context = {
        "run": run_id,
        "arms": "ARRAY" + str(arm_ids),
        "tasks": "ARRAY" + str(task_ids),
        "arm_count": len(arm_ids),
        "task_count": len(task_ids),
        "stride": next(p for p in (1_000_003, 999_983, 15_485_863) if math.gcd(p, attempts) == 1),
        "attempts": attempts,
    }
    columns: list[str] = []
    values: list[str] = []
    params: list = []
    for field in Attempt._meta.concrete_fields:
        column = str(field.column)
        if column in attempt_values:
            columns.append(column)
            values.append(attempt_values[column] % context)
        elif not field.null and not field.primary_key:
            columns.append(column)
            values.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
    draws = ", ".join(f"random() AS r{n}" for n in range(1, 7))
    sql = (
        f"INSERT INTO {Attempt._meta.db_table} ({', '.join(columns)}) SELECT {', '.join(values)} "
        f"FROM (SELECT g, {draws} FROM generate_series(%s::int, %s::int) AS g OFFSET 0) AS draws"
    )
    return sql, params
