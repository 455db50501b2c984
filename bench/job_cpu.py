"""CPU per attempt of one job, in this process: for comparing two versions of the hot path.

`bench/overhead.py` measures the real set-up (two RQ workers, their database backends, the Redis
server) and checks issue 31's targets. Its CPU per attempt moves by ±20% from one run to the next
on a shared two-core machine, more than most changes move it. This script runs one
`execute_attempts` job over every attempt of a zero-latency mock run in its own process (the job's
thread and its pool's threads, with no worker around them) and reads that process's CPU, and the
CPU of the database backend serving it when the database is a local Postgres (n/a otherwise:
SQLite runs inside this process, and a remote server's backends are not ours to read). Run it for each
version in turn, a few times each, and compare the means:

    .venv/bin/python bench/job_cpu.py [--attempts 3000] [--runs 3]

No target: the figures are for comparison. Production settings, on `make demo`'s stores unless
DATABASE_URL / REDIS_URL say otherwise (as overhead.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import use_production_environment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3, help="runs of the job, each on a run of its own")
    args = parser.parse_args()
    if args.attempts < 10 or args.runs < 1:
        parser.error("--attempts: at least 10; --runs: at least 1")

    use_production_environment()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from prbench.queues import ensure_redis

    ensure_redis()
    one_job(100)  # a warm-up, not counted: imports, the attempt pool's threads, first connections
    figures = [one_job(args.attempts) for _ in range(args.runs)]
    for index, (python_ms, backend_ms) in enumerate(figures, 1):
        backend = f"{backend_ms:.3f} ms" if backend_ms is not None else "n/a"
        print(f"run {index}: python {python_ms:.3f} ms, database backend {backend} per attempt")
    mean = sum(python for python, _ in figures) / len(figures)
    print(f"mean python CPU per attempt: {mean:.3f} ms over {len(figures)} run(s) of {args.attempts} attempts")
    return 0


def one_job(attempts: int) -> tuple[float, float | None]:
    """(python ms, backend ms or None) per attempt of one job over a fresh run's attempts."""
    from django.db import connection

    from bench.overhead import zero_latency_spec
    from datasets.demo import load_demo_dataset
    from experiments.actions import do_save_experiment, do_start_run
    from experiments.jobs import execute_attempts
    from experiments.models import AttemptStatus
    from orgs.models import Organization

    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    spec = zero_latency_spec("job cpu", load_demo_dataset(org), 10, attempts)
    # Inference only, as overhead.py: the job's own work, not the validation's subprocesses.
    run = do_start_run(do_save_experiment(org, spec), inference_only=True)
    ids = list(run.attempts.order_by("sequence").values_list("pk", flat=True))
    backend = _backend_cpu_reader(connection)
    python_before, backend_before = _process_cpu_s(), backend()
    execute_attempts(run.pk, ids)
    python_s, backend_after = _process_cpu_s() - python_before, backend()
    done = run.attempts.filter(status=AttemptStatus.COMPLETED).count()
    if done != len(ids):
        raise SystemExit(f"the job completed {done} of {len(ids)} attempts")
    backend_ms = None if backend_after is None or backend_before is None else (backend_after - backend_before)
    return python_s * 1000 / len(ids), None if backend_ms is None else backend_ms * 1000 / len(ids)


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _backend_cpu_reader(connection):
    """A reader of the CPU seconds of the Postgres backend serving ``connection``, or one that
    gives None: SQLite runs inside this process (its CPU is in the python figure), and a
    remote server's /proc is not ours to read."""
    from bench._cpu import process_cpu_s

    if connection.vendor != "postgresql":
        return lambda: None
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    if not Path(f"/proc/{pid}/stat").exists():
        return lambda: None
    return lambda: process_cpu_s(pid)


if __name__ == "__main__":
    raise SystemExit(main())
