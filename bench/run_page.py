"""The run page of one large live run (issue 13): each request a member's browser makes, timed.

It creates a fresh database, prbench_runpagebench (or --database), on the Postgres server
DATABASE_URL names (and drops it at the end, however it ends; with --keep it keeps it, and the
next run with --keep reuses its run when it has N attempts, after a VACUUM ANALYZE, instead of
seeding for minutes again), migrates it and builds one running run of 8 arms
on the demo dataset's 12 tasks with N attempts (default 1,000,000), inserted with
generate_series: the first 97% (in execution order) finished, mostly completed, some failed,
then a few running and the rest queued; an evaluator profile has judged 90% of the answered
attempts and holds the rest pending. Then, through Django's test Client logged in as a member
(production settings, DEBUG off), it times each request a browser makes of the run page:

    the full run page, one live poll of it (its boards' HTML as kept between polls of unchanged
    summaries), GET /api/runs/{id} (what CI polls, with a read-only
    API key), the first attempts page, one refresh of that
    page's rows, filtered and sorted pages, and a deep page each way (its cursor near the end);
    the list filtered to wrong answers, to an error category, to one task, to text in the
    question and to text in the answers (one answer in a thousand holds it); the answers
    matrix, first and deep

each the median of up to 5 after one warm-up, against the target (< 0.3 s whatever the run's
size; < 50 ms for the run page, its live poll and the run endpoint, which read the run's
counters: issue 31), with EXPLAIN ANALYZE execution times of its slowest queries on attempts
and verdicts (and it stops if a page shows the evaluator's rationale); then the parts of a live poll one by
one: the run bar's counters, the boards and charts (from the run's summaries, refreshed once
after seeding: their HTML as kept, and drawn anew as after a fold) and the budget line.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/run_page.py [--attempts 1000000] [--database prbench_runpagebench] [--keep]

It always exits 0 and marks a missed target with `!`.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._seeding import bench_server, drop_database, insert_in_batches, migrated_django, recreate_database  # noqa: E402
from bench._settings import production_environment  # noqa: E402

DATABASE = "prbench_runpagebench"
ARMS = 8
TARGET_S = 0.3
RUN_TARGET_S = 0.05  # the run page, its live poll and GET /api/runs/{id}: counters, not counts (issue 31)
REPEATS = 5
BUDGET_S = 10  # repeats of one slow request stop after this long
SLOWEST_QUERIES = 3  # per request, explained
MEMBER = "member@runpage.bench"


@dataclass(frozen=True)
class Bench:
    run_id: int
    run_code: str
    attempts: int
    api_key: str  # read-only, of the run's organisation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--database", default=DATABASE, help="the database to create (and drop) for the bench")
    parser.add_argument("--keep", action="store_true", help="keep the database, and reuse its run next time")
    args = parser.parse_args()
    database = args.database
    if not database.replace("_", "").isalnum():
        parser.error("--database: letters, digits and underscores only")
    server, url = bench_server(parser, database)
    os.environ.update({**production_environment(), "DATABASE_URL": url})
    try:
        bench = kept(args.attempts) if args.keep and database_exists(server, database) else None
        if bench is None:
            recreate_database(server, database)
            bench = seed(args.attempts)
        time_requests(bench)
    finally:
        from django.db import connections

        from prbench.queues import stop_embedded_redis

        stop_embedded_redis()  # the run page asked Redis who waits for a slot
        connections.close_all()
        if not args.keep:
            drop_database(server, database)
    return 0


def database_exists(server: str, database: str) -> bool:
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        return connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone() is not None


# --- the run ---------------------------------------------------------------------------------


def seed(attempts: int) -> Bench:
    migrated_django()
    from django.db import connection

    run = create_run(attempts)
    task_ids = list(run.experiment.dataset.tasks.order_by("pk").values_list("pk", flat=True))
    arm_ids = list(run.arms.order_by("position").values_list("pk", flat=True))
    insert, params = attempt_insert(run.pk, task_ids, arm_ids, attempts)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        insert_in_batches(cursor, insert, params, attempts, seed=0.17)
        cursor.execute(*verdict_insert(run.pk, run.evaluator_profile_id))
        cursor.execute("VACUUM ANALYZE experiments_attempt")
        cursor.execute("VACUUM ANALYZE evaluation_verdict")
    print(f"seeded {attempts:,} attempts and their verdicts in {time.perf_counter() - started:.1f} s")
    from leaderboards.summaries import refresh_run_summaries

    started = time.perf_counter()
    refresh_run_summaries(run.pk)  # what the recording's refresh job keeps up to date
    print(f"refreshed the run's summaries in {time.perf_counter() - started:.1f} s")
    from orgs.api_keys import do_create_api_key

    _, key = do_create_api_key(run.org, "run-page-bench", ["read"], None)
    return Bench(run.pk, str(run.code), attempts, key)


def kept(attempts: int) -> Bench | None:
    """The run a kept database holds, when it has ``attempts`` attempts (None: seed anew), its
    tables vacuumed and analysed again: autovacuum may be off, and the requests of earlier
    benches left rows behind (sessions, audit, API keys)."""
    migrated_django()
    from django.db import connection

    from experiments.models import Run
    from orgs.api_keys import do_create_api_key

    run = Run.objects.filter(org__slug="runpagebench", total_attempts=attempts).first()
    if run is None:
        print(f"the kept database has no run of {attempts:,} attempts: seeding it anew")
        connection.close()  # the database is dropped and created again
        return None
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"reused the kept run of {attempts:,} attempts (vacuumed and analysed)")
    _, key = do_create_api_key(run.org, f"run-page-bench-{int(time.time())}", ["read"], None)
    return Bench(run.pk, str(run.code), attempts, key)


def create_run(attempts: int):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from datasets.demo import load_demo_dataset
    from evaluation.models import EvaluatorProfile
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
    from experiments.models import Run, RunArm, RunStatus
    from orgs.models import Membership, Organization, Role

    org = Organization.objects.create(slug="runpagebench", name="Run page bench")
    member = get_user_model().objects.create_user(username=MEMBER, email=MEMBER)
    Membership.objects.create(user=member, org=org, role=Role.MEMBER)
    dataset = load_demo_dataset(org)
    arms = [ArmSpec(f"arm-{n}", "mock", f"mock-{n}", {"mode": "noisy", "quality": 0.2 + n * 0.07}) for n in range(ARMS)]
    experiment = do_save_experiment(org, ExperimentSpec(name="Run page bench", dataset=dataset, arms=arms))
    profile = EvaluatorProfile.objects.create(name="bench-judge", provider="mock", model_name="mock-judge")
    run = Run.objects.create(
        org=org,
        experiment=experiment,
        seed=17,
        status=RunStatus.RUNNING,
        evaluator_profile=profile,
        total_attempts=attempts,
        started_at=timezone.now(),
    )
    RunArm.objects.bulk_create(
        RunArm(run=run, label=a.label, provider=a.provider, model_name=a.model_name, config=a.config, position=n)
        for n, a in enumerate(arms)
    )
    return run


RARE_TEXT = "needle_in_the_patch.py"
# Values an attempt of the live run has, from its place in execution order (the share `done`
# of the run before it) and the uniform draws r1..r6 of its row.
FINISHED, RUNNING = 0.97, 0.975
ATTEMPT_VALUES = {
    "code": "gen_random_uuid()",
    "run_id": "%(run)s",
    "arm_id": "(%(arms)s::bigint[])[mod(g, %(arm_count)s) + 1]",
    "task_id": "(%(tasks)s::bigint[])[mod(g / %(arm_count)s, %(task_count)s) + 1]",
    "repetition": "g / (%(arm_count)s * %(task_count)s)",
    "sequence": "seq",
    "status": f"CASE WHEN done >= {RUNNING} THEN 'queued' WHEN done >= {FINISHED} THEN 'running'"
    " WHEN r1 < 0.92 THEN 'completed' ELSE 'failed' END",
    "error_category": f"CASE WHEN done < {FINISHED} AND r1 >= 0.92 THEN (ARRAY['rate_limited', 'timeout',"
    " 'server_error', 'overloaded', 'connection', 'context_length_exceeded'])[1 + floor(r2 * 6)::int] ELSE '' END",
    "error_message": f"CASE WHEN done < {FINISHED} AND r1 >= 0.92 THEN 'the provider gave up' ELSE '' END",
    # What the kind read in the answer: a patch's first line, and one in a thousand holds the
    # text the answer search looks for.
    "extracted_answer": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN CASE WHEN r4 < 0.001"
    f" THEN 'diff --git a/{RARE_TEXT} b/{RARE_TEXT}' ELSE 'diff --git a/src/module.py b/src/module.py' END ELSE '' END",
    # As providers/outcomes.py classes them: timeouts and context lengths are the model's, and
    # three answers in a thousand the validation harness gave no verdict on.
    "outcome": f"CASE WHEN done >= {FINISHED} THEN '' WHEN r1 < 0.92 THEN CASE WHEN r4 < 0.003"
    " THEN 'infrastructure_failure' ELSE 'model_success' END WHEN floor(r2 * 6)::int IN (1, 5)"
    " THEN 'model_failure' ELSE 'infrastructure_failure' END",
    "retries": "floor(r3 * 1.2)::int",
    "resolved": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN r2 < 0.2 + mod(g, %(arm_count)s) * 0.07 END",
    "patch_present": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN r2 < 0.95 END",
    "patch_applied": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN r2 < 0.9 END",
    "latency_ms": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN 400 + floor(r5 * r6 * 40000)::int END",
    "wall_ms": f"CASE WHEN done < {FINISHED} THEN 450 + floor(r5 * r6 * 60000)::int END",
    "input_tokens": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN 1500 + floor(r3 * 6000)::int END",
    "output_tokens": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN 80 + floor(r4 * 900)::int END",
    "cost_usd": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN round((r3 * 0.02)::numeric, 8) END",
    "cost_source": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN 'catalog' ELSE '' END",
    "response_cached": "r6 < 0.02",
    "queued_at": "now() - interval '2 hours'",
    "started_at": f"CASE WHEN done < {RUNNING} THEN now() - interval '1 hour' END",
    "responded_at": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN now() - interval '30 minutes' END",
    "scored_at": f"CASE WHEN done < {FINISHED} AND r1 < 0.92 THEN now() - interval '20 minutes' END",
}


def attempt_insert(run_id: int, task_ids: list[int], arm_ids: list[int], attempts: int) -> tuple[str, list]:
    """One INSERT ... SELECT over generate_series(first, last) (its last two parameters).
    Every other required column gets the model's default, so a column added later needs no
    change here."""
    from experiments.models import Attempt

    context = {
        "run": run_id,
        "arms": "ARRAY" + str(arm_ids),
        "tasks": "ARRAY" + str(task_ids),
        "arm_count": len(arm_ids),
        "task_count": len(task_ids),
    }
    # A permutation of 0..N-1, so execution order is not insertion order (as with a seeded plan).
    stride = next(p for p in (1_000_003, 999_983, 15_485_863) if math.gcd(p, attempts) == 1)
    sequence = f"mod(g::bigint * {stride}, {attempts})"
    draws = ", ".join(f"random() AS r{n}" for n in range(1, 7))
    rows = (
        f"SELECT g, {sequence} AS seq, {sequence}::float8 / {attempts} AS done, {draws}"
        " FROM generate_series(%s::int, %s::int) AS g OFFSET 0"
    )
    return insert_select(Attempt, {column: value % context for column, value in ATTEMPT_VALUES.items()}, rows)


JUDGED_SHARE = 0.9
RATIONALE = "The patch fixes the reported case but not its neighbours."  # staff only: no page may show it
VERDICT_VALUES = {
    "attempt_id": "id",
    "run_id": "%(run)s",
    "profile_id": "%(profile)s",
    "status": f"CASE WHEN random() < {JUDGED_SHARE} THEN 'judged' ELSE 'pending' END",
    "overall": "floor(random() * 100)::int",
    "rationale": f"'{RATIONALE}'",
    "created_at": "now()",
}


def verdict_insert(run_id: int, profile_id: int) -> tuple[str, list]:
    """A verdict for every answered attempt of the run: judged, or pending (being judged)."""
    from evaluation.models import Verdict

    values = {column: value % {"run": run_id, "profile": profile_id} for column, value in VERDICT_VALUES.items()}
    rows = f"SELECT id FROM experiments_attempt WHERE run_id = {run_id} AND status = 'completed'"
    return insert_select(Verdict, values, rows)


def insert_select(model, values: dict[str, str], rows: str) -> tuple[str, list]:
    """INSERT INTO the model's table the given SQL values per row of ``rows``; each other
    required column gets the model's default, as a parameter."""
    from django.db import connection

    columns, expressions, params = [], [], []
    for field in model._meta.concrete_fields:
        column = str(field.column)
        if column in values:
            columns.append(column)
            expressions.append(values[column])
        elif not field.null and not field.primary_key:
            columns.append(column)
            expressions.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
    sql = (
        f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) SELECT {', '.join(expressions)} FROM ({rows}) AS r"
    )
    return sql, params


# --- the requests ----------------------------------------------------------------------------


def time_requests(bench: Bench) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    client = Client()
    client.force_login(get_user_model().objects.get(email=MEMBER))
    page = reverse("experiments:run", args=[bench.run_code])
    rows = reverse("experiments:run_attempts", args=[bench.run_code])
    deep = deep_cursor(bench)
    answered = int(bench.attempts * 0.9)  # deep among the answered (the last 3% are not)
    matrix = reverse("experiments:run_answers", args=[bench.run_code])
    task, question, last_but_one = task_words(bench)
    live = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "live"}
    refresh = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "attempt-rows"}
    navigate = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "attempts"}
    api = {"HTTP_AUTHORIZATION": f"Bearer {bench.api_key}"}
    requests: list[tuple[str, str, dict, dict]] = [
        ("run page (full)", page, {}, {}),
        ("live poll of the run page", page, {}, live),
        ("GET /api/runs/{id}", f"/api/runs/{bench.run_code}", {}, api),
        ("first attempts page", rows, {}, navigate),
        ("refresh of that page's rows", rows, {}, refresh),
        ("arm + status, slowest first", rows, {"arm": "arm-3", "status": "completed", "sort": "-latency"}, navigate),
        ("outcome filter, by cost", rows, {"outcome": "infrastructure_failure", "sort": "cost"}, navigate),
        (f"deep page (after #{deep:,})", rows, {"after": deep}, navigate),
        ("deep page back (before it)", rows, {"before": deep}, navigate),
        ("wrong answers, slowest first", rows, {"result": "wrong", "sort": "-latency"}, navigate),
        ("wrong answers, deep page", rows, {"result": "wrong", "after": answered}, navigate),
        ("one error category, by cost", rows, {"error": "timeout", "sort": "cost"}, navigate),
        ("one task's attempts", rows, {"task": task, "sort": "-latency"}, navigate),
        ("text in the question", rows, {"question": question}, navigate),
        ("text in the question, wrong answers", rows, {"question": question, "result": "wrong"}, navigate),
        ("text in the answer (1 in 1,000)", rows, {"answer": RARE_TEXT}, navigate),
        ("text in the answer, deep page", rows, {"answer": RARE_TEXT, "after": answered}, navigate),
        ("text in the answer, none has it", rows, {"answer": "no answer says this"}, navigate),
        ("answers matrix, first page", matrix, {}, {}),
        ("answers matrix, last page", matrix, {"after": last_but_one}, {}),
    ]
    print(f"\none running run of {bench.attempts:,} attempts, {ARMS} arms; medians of up to {REPEATS} after a warm-up")
    for n, (label, url, params, headers) in enumerate(requests):
        (seconds, repeats, cpu), size, slowest = time_request(client, url, params, headers)
        target = RUN_TARGET_S if n < 3 else TARGET_S  # the first three read the run's counters
        verdict = "met" if seconds < target else "! NOT met"
        figure = f"{seconds * 1000:8.1f} ms (n={repeats}) {cpu.figure} {size / 1024:6.1f} KB"
        print(f"  {label:<34} {figure} | target < {target * 1000:g} ms {verdict}")
        for ms, sql in slowest:
            print(f"      EXPLAIN ANALYZE {ms:9.2f} ms  {sql}")
    time_parts(bench)


def task_words(bench: Bench) -> tuple[str, str, str]:
    """A task's id, words of its question (asked by it alone), and the task before the last
    (the matrix's last page starts after it)."""
    from experiments.models import Run

    tasks = list(Run.objects.get(pk=bench.run_id).experiment.dataset.tasks.order_by("pk"))
    task = tasks[len(tasks) // 2]
    return task.external_id, " ".join(task.problem_statement.splitlines()[0].split()[:3]), str(tasks[-2].code)


def deep_cursor(bench: Bench) -> int:
    """A sequence near the end of the run, past 99% of its attempts."""
    return int(bench.attempts * 0.99)


def time_request(client, url: str, params: dict, headers: dict) -> tuple[Timing, int, list[tuple[float, str]]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    responses = []

    def get() -> None:
        responses.append(client.get(url, params, secure=True, **headers))

    timing = timed(get)
    for response in responses:
        if response.status_code not in (200, 286):
            raise SystemExit(f"GET {url} {params} answered {response.status_code}")
        if RATIONALE in response.content.decode():
            raise SystemExit(f"GET {url} {params} shows the evaluator's rationale")
    with CaptureQueriesContext(connection) as captured:
        get()
    return timing, len(responses[-1].content), explain_slowest(captured.captured_queries)


def time_parts(bench: Bench) -> None:
    """Where a live poll's time goes: the run bar's counters, the boards and charts (from the
    run's summaries: their HTML as kept while the summaries stay as they are, and as drawn
    when they have moved, as on most polls of a run that records), and the budget line; and,
    for comparison, what counting the run bar from the attempts and verdicts costs
    (recount_runs does it)."""
    from django.http import QueryDict

    from experiments.budgets import budget_status
    from experiments.models import Run
    from experiments.progress import run_progress
    from experiments.run_counters import counted
    from leaderboards.pages import rendered_board_section, run_page_boards

    run = Run.objects.get(pk=bench.run_id)
    parts = [
        ("run bar: the run's counters", lambda: run_progress(run)),
        ("(the same counted from attempts)", lambda: counted([run.pk])),
        ("boards and charts: HTML kept", lambda: run_page_boards(run, "/runs/x/", QueryDict())),
        ("boards and charts: drawn anew", lambda: rendered_board_section(run, "/runs/x/", QueryDict())),
        ("budget line", lambda: budget_status(run)),
    ]
    print("\nthe parts of a live poll")
    for label, part in parts:
        seconds, repeats, cpu = timed(part)
        print(f"  {label:<34} {seconds * 1000:8.1f} ms (n={repeats}) {cpu.figure}")


@dataclass(frozen=True)
class Cpu:
    """CPU per call, in seconds: this process's (Django) and its Postgres backend's (from
    /proc, in clock ticks: a mean over the repeats), which other load on the machine moves
    much less than wall time."""

    app: float
    database: float

    @property
    def figure(self) -> str:
        app, database = self.app * 1000, self.database * 1000
        return f"cpu {app + database:6.1f} ms (app {app:.1f} + db {database:.1f})"


class Timing(NamedTuple):
    seconds: float  # the median wall time
    repeats: int
    cpu: Cpu


def timed(call: Callable[[], object]) -> Timing:
    """The median wall time of ``call`` after one warm-up (caches, plans), and its mean CPU:
    REPEATS calls, or as many as BUDGET_S allows, at least one."""
    from django.db import connection

    from bench._cpu import process_cpu_s

    call()
    # What the set-up and the warm-up left (the migrations' graph, a first drawing's caches) is
    # collected now: else the first full collection, ~170 ms of CPU, fell in a timed call and
    # tripled the run page's mean CPU, a cost of this script's set-up no web worker pays.
    gc.collect()
    backend = connection.connection.info.backend_pid
    timings: list[float] = []
    deadline = time.perf_counter() + BUDGET_S
    app, database = time.process_time(), process_cpu_s(backend)
    while len(timings) < REPEATS and (not timings or time.perf_counter() < deadline):
        started = time.perf_counter()
        call()
        timings.append(time.perf_counter() - started)
    app, database = time.process_time() - app, process_cpu_s(backend) - database
    cpu = Cpu(app / len(timings), database / len(timings))
    return Timing(statistics.median(timings), len(timings), cpu)


# The tables that grow with a run: the queries worth explaining read one of these.
RUN_TABLES = ('"experiments_attempt"', '"evaluation_verdict"')


def explain_slowest(queries: list[dict]) -> list[tuple[float, str]]:
    """EXPLAIN ANALYZE each query of the request that reads a run's attempts or verdicts:
    their execution times inside Postgres, slowest first (the rest are sessions and rows
    looked up by key)."""
    from django.db import connection

    explained = []
    with connection.cursor() as cursor:
        for sql in {query["sql"] for query in queries if any(table in query["sql"] for table in RUN_TABLES)}:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
            plan = cursor.fetchone()[0][0]
            explained.append((plan["Execution Time"], shorten(sql)))
    return sorted(explained, reverse=True)[:SLOWEST_QUERIES]


def shorten(sql: str, width: int = 110) -> str:
    one_line = " ".join(sql.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


if __name__ == "__main__":
    raise SystemExit(main())
