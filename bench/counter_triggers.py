"""What the run counters' triggers (experiments/run_counters.py) cost the hot path (issue 31).

It creates a fresh database, prbench_countertriggers (or --database), on the Postgres server
DATABASE_URL names (and drops it at the end), migrates it and seeds one run of N queued
attempts (default 100,000) as bench/run_page.py does. Then it times status UPDATEs the way the
pipeline makes them, each in a transaction rolled back, alternately with the triggers and
without them (dropped inside the transaction, so the rollback puts them back):

    one UPDATE of 10,000 attempts (queued -> running), and a chunk of 64 (a bulk record)

each the median of --repeats, and prints the cost the triggers add per statement and per
attempt, beside Postgres's own figure for the trigger (EXPLAIN ANALYZE's "Trigger" time, which
leaves out capturing the transition tables).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/counter_triggers.py [--attempts 100000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._seeding import bench_server, drop_database, recreate_database  # noqa: E402
from bench._settings import production_environment  # noqa: E402

DATABASE = "prbench_countertriggers"
SIZES = (10_000, 64)
ATTEMPT_TRIGGERS = ("insert", "update", "delete")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--database", default=DATABASE, help="the database to create (and drop) for the bench")
    args = parser.parse_args()
    if not args.database.replace("_", "").isalnum():
        parser.error("--database: letters, digits and underscores only")
    server, url = bench_server(parser, args.database)
    os.environ.update({**production_environment(), "DATABASE_URL": url})
    recreate_database(server, args.database)
    try:
        run_id = seed(args.attempts)
        measure(run_id, args.repeats)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(server, args.database)
    return 0


def seed(attempts: int) -> int:
    from bench._seeding import insert_in_batches, migrated_django

    migrated_django()
    from django.db import connection

    from bench.run_page import attempt_insert, create_run

    run = create_run(attempts)
    task_ids = list(run.experiment.dataset.tasks.order_by("pk").values_list("pk", flat=True))
    arm_ids = list(run.arms.order_by("position").values_list("pk", flat=True))
    insert, params = attempt_insert(run.pk, task_ids, arm_ids, attempts)
    with connection.cursor() as cursor:
        insert_in_batches(cursor, insert, params, attempts, seed=0.17)
        cursor.execute("UPDATE experiments_attempt SET status = 'queued'")  # every one claimable
        cursor.execute("VACUUM ANALYZE experiments_attempt")
    return run.pk


def claim(size: int) -> str:
    return (
        "UPDATE experiments_attempt SET status = 'running', claims = claims + 1 WHERE id IN"
        f" (SELECT id FROM experiments_attempt WHERE status = 'queued' ORDER BY id LIMIT {size})"
    )


def timed_update(size: int, triggers: bool) -> tuple[float, float]:
    """Wall seconds of one status UPDATE of ``size`` attempts, and the trigger's own time that
    Postgres reports (ms), rolled back."""
    from django.db import connection, transaction

    trigger_ms = 0.0
    with transaction.atomic(), connection.cursor() as cursor:
        if not triggers:
            for op in ATTEMPT_TRIGGERS:
                cursor.execute(f"DROP TRIGGER run_counters_experiments_attempt_{op} ON experiments_attempt")
        started = time.perf_counter()
        cursor.execute(claim(size))
        seconds = time.perf_counter() - started
        if triggers:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + claim(size))
            trigger_ms = sum(t["Time"] for t in cursor.fetchone()[0][0].get("Triggers", []))
        transaction.set_rollback(True)
    return seconds, trigger_ms


def measure(run_id: int, repeats: int) -> None:
    print(f"status UPDATEs of a run's attempts, medians of {repeats}, with and without the counters' triggers")
    for size in SIZES:
        timings: dict[bool, list[float]] = {True: [], False: []}
        reported: list[float] = []
        for _ in range(repeats):
            for triggers in (True, False):  # alternated: the machine's load falls on both alike
                seconds, trigger_ms = timed_update(size, triggers)
                timings[triggers].append(seconds)
                if triggers:
                    reported.append(trigger_ms)
        with_, without = statistics.median(timings[True]), statistics.median(timings[False])
        added = with_ - without
        print(
            f"  {size:>6,} attempts: {with_ * 1000:8.2f} ms with, {without * 1000:8.2f} ms without;"
            f" added {added * 1000:7.2f} ms ({added / size * 1e6:6.2f} us per attempt);"
            f" trigger time as Postgres reports it {statistics.median(reported):6.2f} ms"
            f" ({statistics.median(reported) / size * 1000:5.2f} us per attempt)"
        )
    from experiments.models import RunCounters
    from experiments.run_counters import counted

    row = RunCounters.objects.filter(run_id=run_id).values(*counted([run_id])[run_id]).get()
    assert row == counted([run_id])[run_id], "the counters disagree with the attempts"
    print("  the run's counters equal the GROUP BY over its attempts after the rollbacks")


if __name__ == "__main__":
    raise SystemExit(main())
