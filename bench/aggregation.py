"""Reading one large run (issue 13): how long each view of it takes, and how much memory.

It creates a fresh database, prbench_aggbench (or --database), on the Postgres server
DATABASE_URL names (and drops it at the end, however it ends), migrates it and builds one
finished run of 8 arms on the demo dataset's 12 tasks with N attempts (default 1,000,000), inserted with
generate_series: mostly completed, some failed (rate limits, timeouts, server errors), a few
cancelled, resolved at a different rate per arm, with latencies, costs and patch metrics, and
each attempt's transcript as the pipeline keeps it: the prompt it was sent (the demo's PR
prompt with the task's files, about 4 kB), and for an answered one its answer and the patch
read in it (--no-transcripts leaves them empty, as attempts were before issue 24).
Then it runs each section asked for:

    exports   `manage.py export_run --format json | csv | swebench-preds > /dev/null`, each in
              a child process (its wall time, and its peak RSS from wait4), beside a raw COPY
              of the same columns from the same join (for the predictions: instance id, model
              name and patch, a JSON object a line, of the attempts the files hold);
              attempts.parquet likewise; then the SWE-bench report of every model and one
              model's predictions and report (--arm --rep). Targets: < 30 s and < 256 MB each.
              First the background export job (experiments/run_exports.py) writing the
              JSON export to its file, timed in its worker's process beside a raw COPY of
              the same columns (row_to_json): target <= 2x the raw COPY (issue 31), with
              the process's peak RSS.

    export-job  that background job alone.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/aggregation.py [--attempts 1000000] [--only exports] [--no-transcripts] \\
        [--database NAME] [--keep] [--reuse]

--keep leaves the database in place at the end, and --reuse measures the run it left there
instead of seeding one (after a VACUUM ANALYZE): a million attempts take minutes to seed.

It always exits 0 and marks a missed target with `!`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._seeding import (  # noqa: E402
    attempt_insert,
    bench_server,
    drop_database,
    insert_in_batches,
    migrated_django,
    recreate_database,
)
from bench._settings import production_environment  # noqa: E402

DATABASE = "prbench_aggbench"
ARMS = 8
EXPORT_SECONDS, EXPORT_MB = 30, 256


@dataclass(frozen=True)
class Bench:
    run_id: int
    run_code: str
    attempts: int
    repetitions: int
    env: dict[str, str]  # what a child process needs to reach the bench database


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--only", help="comma-separated sections: " + ", ".join(SECTIONS))
    parser.add_argument(
        "--no-transcripts", action="store_true", help="attempts without their prompts and answers (before issue 24)"
    )
    parser.add_argument("--database", default=DATABASE, help="the database to create (and drop) for the bench")
    parser.add_argument("--keep", action="store_true", help="leave the database in place at the end, for --reuse")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the run a --keep left in the database instead of seeding one"
    )
    args = parser.parse_args()
    database = args.database
    if not database.replace("_", "").isalnum():
        parser.error("--database: letters, digits and underscores only")
    sections = args.only.split(",") if args.only else list(SECTIONS)
    if unknown := set(sections) - set(SECTIONS):
        parser.error(f"no section {', '.join(sorted(unknown))}; there are {', '.join(SECTIONS)}")
    server, url = bench_server(parser, database)
    env = {**production_environment(), **os.environ, "DATABASE_URL": url}
    if not args.reuse:
        recreate_database(server, database)
    try:
        os.environ.update(env)
        bench = reused(env) if args.reuse else seed(args.attempts, env, transcripts=not args.no_transcripts)
        from prbench.queues import ensure_redis

        # The embedded Redis is this process's, stopped below: started by the first child that
        # needed it (an export job's progress, an export command), it outlived the bench.
        ensure_redis()
        for name in sections:
            SECTIONS[name](bench)
    finally:
        from django.db import connections

        from prbench.queues import stop_embedded_redis

        stop_embedded_redis()  # no server outlives the bench
        connections.close_all()
        if not args.keep:
            drop_database(server, database)
    return 0


# --- the run ---------------------------------------------------------------------------------


def seed(attempts: int, env: dict[str, str], transcripts: bool = True) -> Bench:
    migrated_django()
    from django.db import connection

    run = create_run(attempts)
    task_ids = list(run.experiment.dataset.tasks.order_by("pk").values_list("pk", flat=True))
    arm_ids = list(run.arms.order_by("position").values_list("pk", flat=True))
    create_transcripts(task_ids if transcripts else [])
    insert, params = attempt_insert(run.pk, task_ids, arm_ids, attempts, ATTEMPT_VALUES)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        insert_in_batches(cursor, insert, params, attempts, seed=0.13)
        cursor.execute("DROP TABLE bench_transcripts")
        cursor.execute("VACUUM ANALYZE experiments_attempt")
    print(f"seeded {attempts:,} attempts in {time.perf_counter() - started:.1f} s")
    from leaderboards.summaries import refresh_run_summaries

    started = time.perf_counter()
    refresh_run_summaries(run.pk)  # as the run's end does: the JSON export's head reads them
    print(f"refreshed the run's summaries in {time.perf_counter() - started:.1f} s")
    return Bench(run.pk, str(run.code), attempts, int(run.config_snapshot["repetitions"]), env)


def reused(env: dict[str, str]) -> Bench:
    """The run a --keep left, its tables analysed again: autovacuum may be off, and a plan
    made on stale statistics (or reading dead rows) would not measure the code."""
    migrated_django()
    from django.db import connection

    from experiments.models import Run

    run = Run.objects.get(org__slug="aggbench")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    attempts = run.attempts.count()
    print(f"reusing the run of {attempts:,} attempts left by --keep (vacuumed and analysed)")
    return Bench(run.pk, str(run.code), attempts, int(run.config_snapshot["repetitions"]), env)


def create_transcripts(task_ids: list[int]) -> None:
    """bench_transcripts: each task's request (its prompt as the demo's PR template renders it,
    recorded as the pipeline records it), an answer (its gold patch in a fenced block) and the
    patch read in it, for the insert to copy onto the task's attempts. Empty: no transcripts."""
    import json

    from django.db import connection

    from datasets.models import TaskInstance
    from evaluation.workloads import workload_for
    from experiments.pipeline import request_record
    from experiments.prompts import prompt_request, render_prompt

    with connection.cursor() as cursor:
        columns = "task_id bigint PRIMARY KEY, request jsonb, output text, patch text"
        cursor.execute(f"CREATE TABLE bench_transcripts ({columns})")
        for task in TaskInstance.objects.filter(pk__in=task_ids).select_related("dataset"):
            prompt = render_prompt(workload_for(task.dataset.kind).default_prompt, task)
            request = request_record(prompt_request(prompt, {}, seed_key=f"13:{task.external_id}"))
            output = f"Here is the fix.\n\n```diff\n{task.gold_patch}```\n"
            cursor.execute(
                "INSERT INTO bench_transcripts VALUES (%s, %s, %s, %s)",
                [task.pk, json.dumps(request), output, task.gold_patch],
            )


def create_run(attempts: int):
    from django.utils import timezone

    from datasets.demo import load_demo_dataset
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
    from experiments.models import Run, RunArm, RunStatus
    from orgs.models import Organization

    org = Organization.objects.create(slug="aggbench", name="Aggregation bench")
    dataset = load_demo_dataset(org)
    arms = [ArmSpec(f"arm-{n}", "mock", f"mock-{n}", {"mode": "noisy", "quality": 0.2 + n * 0.07}) for n in range(ARMS)]
    spec = ExperimentSpec(name="Aggregation bench", dataset=dataset, arms=arms)
    experiment = do_save_experiment(org, spec)
    now = timezone.now()
    # As a started run records it: the attempts cycle through arms, then tasks, then repetitions.
    repetitions = -(-attempts // (ARMS * dataset.tasks.count()))
    run = Run.objects.create(
        org=org,
        experiment=experiment,
        config_snapshot={"repetitions": repetitions},
        seed=13,
        status=RunStatus.COMPLETED,
        total_attempts=attempts,
        started_at=now,
        finished_at=now,
    )
    RunArm.objects.bulk_create(
        RunArm(run=run, label=a.label, provider=a.provider, model_name=a.model_name, config=a.config, position=n)
        for n, a in enumerate(arms)
    )
    return run


# The row's task's transcript column, from bench_transcripts.
TRANSCRIPT = (
    "SELECT b.{column} FROM bench_transcripts b "
    "WHERE b.task_id = (%(tasks)s::bigint[])[mod(g / %(arm_count)s, %(task_count)s) + 1]"
)
# Values an attempt of a finished run has, from the uniform draws r1..r6 of its row.
ATTEMPT_VALUES = {
    "code": "gen_random_uuid()",
    "run_id": "%(run)s",
    "arm_id": "(%(arms)s::bigint[])[mod(g, %(arm_count)s) + 1]",
    "task_id": "(%(tasks)s::bigint[])[mod(g / %(arm_count)s, %(task_count)s) + 1]",
    "repetition": "g / (%(arm_count)s * %(task_count)s)",
    # A permutation of 0..N-1, so execution order is not insertion order (as with a seeded plan).
    "sequence": "mod(g::bigint * %(stride)s, %(attempts)s)",
    "status": "CASE WHEN r1 < 0.91 THEN 'completed' WHEN r1 < 0.99 THEN 'failed' ELSE 'cancelled' END",
    "error_category": "CASE WHEN r1 >= 0.91 AND r1 < 0.99 THEN (ARRAY['rate_limited', 'timeout', 'server_error',"
    " 'overloaded', 'connection', 'context_length_exceeded'])[1 + floor(r2 * 6)::int] ELSE '' END",
    "error_message": "CASE WHEN r1 >= 0.91 AND r1 < 0.99 THEN 'the provider gave up' ELSE '' END",
    # As providers/outcomes.py classes them: timeouts and context lengths are the model's.
    "outcome": "CASE WHEN r1 < 0.91 THEN 'model_success' WHEN r1 < 0.99 THEN CASE WHEN floor(r2 * 6)::int IN (1, 5)"
    " THEN 'model_failure' ELSE 'infrastructure_failure' END ELSE '' END",
    "retries": "CASE WHEN r1 >= 0.91 AND r1 < 0.99 THEN 3 ELSE floor(r3 * 1.2)::int END",
    "resolved": "CASE WHEN r1 < 0.91 THEN r2 < 0.2 + mod(g, %(arm_count)s) * 0.07 END",
    "patch_present": "CASE WHEN r1 < 0.91 THEN r2 < 0.95 END",
    "patch_well_formed": "CASE WHEN r1 < 0.91 THEN r2 < 0.93 END",
    "patch_applied": "CASE WHEN r1 < 0.91 THEN r2 < 0.9 END",
    "fail_to_pass_fraction": "CASE WHEN r1 < 0.91 THEN round(r3::numeric, 2)::float8 END",
    "pass_to_pass_regressions": "CASE WHEN r1 < 0.91 THEN floor(r4 * r4 * 4)::int END",
    "lines_changed": "CASE WHEN r1 < 0.91 AND r2 < 0.95 THEN 1 + floor(r4 * 80)::int END",
    "files_changed": "CASE WHEN r1 < 0.91 AND r2 < 0.95 THEN 1 + floor(r4 * 4)::int END",
    "lint_clean": "CASE WHEN r1 < 0.91 AND r2 < 0.9 THEN r5 < 0.8 END",
    "build_ok": "CASE WHEN r1 < 0.91 AND r2 < 0.9 THEN r5 < 0.97 END",
    "latency_ms": "CASE WHEN r1 < 0.91 THEN 400 + floor(r5 * r6 * 40000)::int END",
    "first_token_ms": "CASE WHEN r1 < 0.91 THEN 150 + floor(r6 * 900)::int END",
    "output_tokens_per_s": "CASE WHEN r1 < 0.91 THEN 20 + r4 * 140 END",
    "wall_ms": "CASE WHEN r1 < 0.99 THEN 450 + floor(r5 * r6 * 60000)::int END",
    "input_tokens": "CASE WHEN r1 < 0.91 THEN 1500 + floor(r3 * 6000)::int END",
    "output_tokens": "CASE WHEN r1 < 0.91 THEN 80 + floor(r4 * 900)::int END",
    "cost_usd": "CASE WHEN r1 < 0.91 THEN round((r3 * 0.02)::numeric, 8) END",
    "cost_source": "CASE WHEN r1 < 0.91 THEN 'catalog' ELSE '' END",
    "response_cached": "r6 < 0.02",
    "finish_reason": "CASE WHEN r1 < 0.91 THEN 'stop' ELSE '' END",
    "queued_at": "now() - interval '2 hours'",
    "started_at": "CASE WHEN r1 < 0.99 THEN now() - interval '1 hour' END",
    "responded_at": "CASE WHEN r1 < 0.91 THEN now() - interval '30 minutes' END",
    "validated_at": "CASE WHEN r1 < 0.91 THEN now() - interval '20 minutes' END",
    # The transcript (bench_transcripts, empty with --no-transcripts): what every attempt that ran
    # was sent, and what an answered one answered.
    "request": f"CASE WHEN r1 < 0.99 THEN coalesce(({TRANSCRIPT.format(column='request')}), '{{}}') ELSE '{{}}' END",
    "output": f"CASE WHEN r1 < 0.91 THEN coalesce(({TRANSCRIPT.format(column='output')}), '') ELSE '' END",
    "extracted_answer": f"CASE WHEN r1 < 0.91 THEN coalesce(({TRANSCRIPT.format(column='patch')}), '') ELSE '' END",
}


# --- exports ---------------------------------------------------------------------------------

# The rows the attempts part of an export holds, from the same join, straight out of Postgres.
RAW_ROWS = """
SELECT t.external_id AS task_id, a.label AS arm_label, x.repetition, x.status, NULLIF(x.outcome, '') AS outcome,
       x.resolved, x.patch_present,
       x.patch_well_formed, x.patch_applied, x.fail_to_pass_fraction, x.pass_to_pass_regressions,
       x.lines_changed, x.files_changed, x.lint_clean, x.build_ok, x.latency_ms, x.first_token_ms,
       x.output_tokens_per_s, x.wall_ms, x.cost_usd::float8 AS cost_usd, x.response_cached AS cached,
       NULLIF(x.error_category, '') AS error_category, x.score, t.problem_statement AS question,
       x.extracted_answer, t.gold_patch AS expected_answer{transcript}
FROM experiments_attempt x
JOIN experiments_taskinstance t ON t.id = x.task_id
JOIN experiments_runarm a ON a.id = x.arm_id
WHERE x.run_id = {run}
ORDER BY x.sequence
"""
# The JSON export and Parquet also hold the raw answer and the messages sent.
RAW_TRANSCRIPT = ", x.output, x.request -> 'messages' AS messages"
# What the predictions files hold (experiments/swebench_export.py): a line per submitted
# attempt with an answer, its instance id, its model (the arm's label, and its repetition when
# the run has several) and its patch, in the export's order.
RAW_PREDICTIONS = """
SELECT json_build_object(
           'instance_id', t.external_id,
           'model_name_or_path', CASE WHEN {repetitions} > 1 THEN a.label || '@rep' || x.repetition ELSE a.label END,
           'model_patch', x.extracted_answer)
FROM experiments_attempt x
JOIN experiments_taskinstance t ON t.id = x.task_id
JOIN experiments_runarm a ON a.id = x.arm_id
WHERE x.run_id = {run} AND x.status IN ('completed', 'failed') AND x.error_category <> 'no_answer'
ORDER BY a.position, a.id, x.repetition, x.sequence
"""
RAW_COPIES = {  # format: the COPY of what it holds
    "json": f"COPY (SELECT row_to_json(r) FROM ({RAW_ROWS.replace('{transcript}', RAW_TRANSCRIPT)}) AS r) TO STDOUT",
    "csv": f"COPY ({RAW_ROWS.replace('{transcript}', '')}) TO STDOUT (FORMAT csv, HEADER)",
    "swebench-preds": f"COPY ({RAW_PREDICTIONS}) TO STDOUT",
}


def exports(bench: Bench) -> None:
    export_job(bench)
    print(f"\nexports of one run of {bench.attempts:,} attempts, {ARMS} arms (written to /dev/null)")
    seconds, peak_mb = manage(bench, "help", "export_run")
    print(f"  start-up alone  {seconds:6.1f} s, peak RSS {peak_mb:5.0f} MB (manage.py help export_run)")
    for format, copy in RAW_COPIES.items():
        seconds, peak_mb = manage(bench, "export_run", bench.run_code, "--format", format)
        raw = raw_copy(copy.format(run=bench.run_id, repetitions=bench.repetitions))
        met = seconds < EXPORT_SECONDS and peak_mb < EXPORT_MB
        print(
            f"  {format:<15} {seconds:6.1f} s, peak RSS {peak_mb:5.0f} MB | raw COPY {raw:5.1f} s "
            f"({seconds / raw:4.1f}x) | target < {EXPORT_SECONDS} s, < {EXPORT_MB} MB {'met' if met else '! NOT met'}"
        )
    # attempts.parquet (the API's, for notebooks), written by the same code in a child process.
    seconds, peak_mb = manage(bench, "shell", "-c", PARQUET.format(run=bench.run_id))
    met = seconds < EXPORT_SECONDS and peak_mb < EXPORT_MB
    print(
        f"  {'attempts.parquet':<15} {seconds:6.1f} s, peak RSS {peak_mb:5.0f} MB | "
        f"target < {EXPORT_SECONDS} s, < {EXPORT_MB} MB {'met' if met else '! NOT met'}"
    )
    # The SWE-bench files: every model (arm and repetition) in a zip or a report keyed by model,
    # and one arm's repetition alone.
    for title, extra in SWEBENCH_EXPORTS.items():
        seconds, peak_mb = manage(bench, "export_run", bench.run_code, *extra)
        met = seconds < EXPORT_SECONDS and peak_mb < EXPORT_MB
        print(
            f"  {title:<32} {seconds:6.1f} s, peak RSS {peak_mb:5.0f} MB | "
            f"target < {EXPORT_SECONDS} s, < {EXPORT_MB} MB {'met' if met else '! NOT met'}"
        )


PARQUET = (
    "import os; from experiments.exports import parquet_chunks; from experiments.models import Run; "
    "out = open(os.devnull, 'wb'); [out.write(chunk) for chunk in parquet_chunks(Run.objects.get(pk={run}))]"
)
SWEBENCH_EXPORTS = {
    "swebench-report (every model)": ("--format", "swebench-report"),
    "swebench-preds --arm arm-3 --rep 7": ("--format", "swebench-preds", "--arm", "arm-3", "--rep", "7"),
    "swebench-report --arm arm-3 --rep 7": ("--format", "swebench-report", "--arm", "arm-3", "--rep", "7"),
}


# Every column of the JSON export's attempts, from the same tables, as JSON straight out of
# Postgres: the row's fields, the task's texts, the raw answer, the messages sent, and the answer
# and trajectory artifacts (the export's grading and trajectory).
RAW_JSON_COLUMNS = """
COPY (SELECT row_to_json(r) FROM (
SELECT t.external_id AS task_id, a.label AS arm_label, x.repetition, x.status, NULLIF(x.outcome, '') AS outcome,
       x.resolved, x.patch_present, x.patch_well_formed, x.patch_applied, x.fail_to_pass_fraction,
       x.pass_to_pass_regressions, x.lines_changed, x.files_changed, x.lint_clean, x.build_ok, x.latency_ms,
       x.first_token_ms, x.output_tokens_per_s, x.wall_ms, x.cost_usd::float8 AS cost_usd,
       x.response_cached AS cached, NULLIF(x.error_category, '') AS error_category, x.turns, x.tool_calls,
       x.repeat_calls, x.score, t.problem_statement AS question, x.extracted_answer,
       t.gold_patch AS expected_answer, x.output, x.request -> 'messages' AS messages,
       (SELECT g.content FROM experiments_artifact g WHERE g.attempt_id = x.id AND g.kind = 'answer' LIMIT 1)
           AS grading,
       (SELECT j.content FROM experiments_artifact j WHERE j.attempt_id = x.id AND j.kind = 'trajectory' LIMIT 1)
           AS trajectory
FROM experiments_attempt x
JOIN experiments_taskinstance t ON t.id = x.task_id
JOIN experiments_runarm a ON a.id = x.arm_id
WHERE x.run_id = {run}
ORDER BY x.sequence
) AS r) TO STDOUT
"""
# The job in a worker's process, as RQ would run it (the row made here rather than queued, so
# Redis is not timed): it prints its wall time, its CPU (its own and its Postgres backend's,
# from /proc), the file's size and the rows written; the file is deleted after.
EXPORT_JOB = "from bench.aggregation import export_job_here; export_job_here({run})"
EXPORT_JOB_RATIO = 2.0


def export_job_here(run_id: int) -> None:
    from django.db import connection

    from experiments.models import Run, RunExport
    from experiments.run_exports import export_file, write_export_job

    run = Run.objects.get(pk=run_id)
    export = RunExport.objects.create(org_id=run.org_id, run=run, format="json")
    backend = backend_cpu_s(connection.connection.info.backend_pid)
    started, cpu = time.perf_counter(), time.process_time()
    write_export_job(export.pk)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    backend = backend_cpu_s(connection.connection.info.backend_pid) - backend
    export.refresh_from_db()
    assert export.status == "done", export.error
    path = export_file(export)
    assert path is not None
    print(seconds, cpu, backend, path.stat().st_size, export.rows_written)
    path.unlink()


def backend_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) of a process on this machine, from /proc: a Postgres
    backend's, when the bench's Postgres runs here (NaN when it does not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def export_job(bench: Bench) -> None:
    """The background JSON export against a raw COPY of the same columns (issue 31): wall
    time, and CPU, which a busy machine moves much less (the job's process and its Postgres
    backend, against the COPY's backend). The COPY runs before and after the job, and the job
    is compared with their mean, so load that comes and goes is shared fairly."""
    print(f"\nthe background JSON export job, one run of {bench.attempts:,} attempts (written to its file)")
    copy_sql = RAW_JSON_COLUMNS.format(run=bench.run_id)
    before = raw_copy_with_cpu(copy_sql)
    started = time.perf_counter()
    command = [sys.executable, "manage.py", "shell", "-c", EXPORT_JOB.format(run=bench.run_id)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=bench.env, cwd=ROOT, text=True)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)  # reaped here, for its peak RSS
    process.stdout.close()
    if code := os.waitstatus_to_exitcode(status):
        raise SystemExit(f"the export job exited {code}")
    with_start_up = time.perf_counter() - started
    after = raw_copy_with_cpu(copy_sql)
    job_s, job_cpu, job_backend, size, rows = (float(v) for v in output.strip().splitlines()[-1].split())
    peak_mb = usage.ru_maxrss / 1024  # KiB on Linux
    raw_s, raw_cpu = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
    ratio, cpu_ratio = job_s / raw_s, (job_cpu + job_backend) / raw_cpu
    print(
        f"  json job        {job_s:6.1f} s ({with_start_up:.1f} s with start-up), {size / 1e6:,.0f} MB, "
        f"{rows:,.0f} rows, peak RSS {peak_mb:5.0f} MB\n"
        f"                  CPU {job_cpu:.1f} s in the worker + {job_backend:.1f} s in its Postgres backend\n"
        f"  raw COPY of the same columns: {before[0]:.1f} s before, {after[0]:.1f} s after; "
        f"CPU {raw_cpu:.1f} s in its backend\n"
        f"  wall {ratio:4.2f}x the raw COPY, CPU {cpu_ratio:4.2f}x | target <= {EXPORT_JOB_RATIO:g}x raw COPY, "
        f"< {EXPORT_MB} MB {'met' if ratio <= EXPORT_JOB_RATIO and peak_mb < EXPORT_MB else '! NOT met'}"
    )


def raw_copy_with_cpu(sql: str) -> tuple[float, float]:
    """The COPY's wall time and its backend's CPU."""
    from django.db import connection

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    cpu = backend_cpu_s(pid)
    seconds = raw_copy(sql)
    return seconds, backend_cpu_s(pid) - cpu


def manage(bench: Bench, *args: str) -> tuple[float, float]:
    """A command end to end (start-up included) in its own process, its output to /dev/null:
    ru_maxrss from wait4 is that process's peak alone."""
    started = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        process = subprocess.Popen([sys.executable, "manage.py", *args], stdout=devnull, env=bench.env, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if code := os.waitstatus_to_exitcode(status):
        raise SystemExit(f"manage.py {' '.join(args)} exited {code}")
    return seconds, usage.ru_maxrss / 1024  # KiB on Linux


def raw_copy(sql: str) -> float:
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy, open(os.devnull, "wb") as devnull:
        for data in copy:
            devnull.write(data)
    return time.perf_counter() - started


SECTIONS: dict[str, Callable[[Bench], None]] = {"exports": exports, "export-job": export_job}


if __name__ == "__main__":
    raise SystemExit(main())
