"""Seeding a large run for the bench scripts: a database of the bench's own on the server
DATABASE_URL names, Django set up on it, and one INSERT ... SELECT of generated attempts run
in batches."""

from __future__ import annotations

import argparse
import math
import os
from urllib.parse import urlsplit, urlunsplit

BATCH = 100_000  # attempts per INSERT: progress shows, and no statement runs for minutes


def bench_server(parser: argparse.ArgumentParser, database: str) -> tuple[str, str]:
    """The Postgres server DATABASE_URL names, and the URL of ``database`` on it."""
    server = os.environ.get("DATABASE_URL", "")
    if not server.startswith(("postgres://", "postgresql://")):
        parser.error("DATABASE_URL must name a Postgres server (the bench creates its own database there)")
    return server, urlunsplit(urlsplit(server)._replace(path=f"/{database}"))


def recreate_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {database}")


def drop_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def migrated_django() -> None:
    """Django set up on the bench database (DATABASE_URL by now), its tables created."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def insert_in_batches(cursor, insert: str, params: list, attempts: int, seed: float) -> None:
    """Run ``insert`` (an INSERT ... SELECT over generate_series(first, last), its last two
    parameters) over 0..attempts-1, BATCH rows at a time, with Postgres' random() seeded."""
    from tqdm import tqdm

    with tqdm(total=attempts, unit=" attempts", desc="seeding") as progress:
        cursor.execute(f"SELECT setseed({seed})")
        for first in range(0, attempts, BATCH):
            last = min(first + BATCH, attempts) - 1
            cursor.execute(insert, [*params, first, last])
            progress.update(last - first + 1)


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
