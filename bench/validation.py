"""Validations per minute: oracle patches validated by 1 and by 2 workers.

By default the tasks are the textkit test repository's bug fixes (evaluation/testbed.py,
mined with ingest_prs before the clock starts): each validation checks out the base
commit from the repository cache, applies the patch and the task's test patch, byte-
compiles and lints the changed files and runs pytest in the sandbox, as a real run does.
``--tasks demo`` uses the self-contained demo tasks instead. The provider call is a
zero-latency mock, so what is measured is validation and its bookkeeping.

    .venv/bin/python bench/validation.py [--attempts 120] [--tasks textkit|demo]

Runs on the `make demo` stores (SQLite under a fresh directory, embedded Redis) with
production settings, unless DATABASE_URL / REDIS_URL are set.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import production_environment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=120)
    parser.add_argument("--tasks", choices=["textkit", "demo"], default="textkit")
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # workers: run one case in this process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.attempts, args.case, args.tasks)))
        return 0
    print(f"tasks: {args.tasks}")
    for workers in (1, 2):
        out = subprocess.run(
            [sys.executable, __file__, "--attempts", str(args.attempts), "--tasks", args.tasks, "--case", str(workers)],
            env=dict(production_environment(), **os.environ),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        per_minute = result["validated"] / result["wall_s"] * 60
        print(
            f"{workers} worker{'s' if workers > 1 else ''}: {result['validated']} validations in "
            f"{result['wall_s']:.1f}s = {per_minute:.0f} validations/minute "
            f"(median validation {result['median_ms']:.0f} ms; {result['resolved']} resolved; {result['sandbox']})"
        )
    return 0


def run_case(attempts: int, workers: int, tasks_from: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from evaluation.sandbox import isolation
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
    from experiments.demo import load_demo_dataset
    from experiments.management.commands.demo import start_workers, stop_workers
    from experiments.models import Artifact, AttemptStatus
    from orgs.models import Organization
    from prbench.queues import ensure_redis

    ensure_redis()
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = load_demo_dataset(org) if tasks_from == "demo" else textkit_dataset(org)
    tasks = dataset.tasks.count()
    spec = ExperimentSpec(
        name=f"validation {workers}",
        dataset=dataset,
        repetitions=max(1, attempts // tasks),
        arms=[ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})],
    )
    experiment = do_save_experiment(org, spec)
    processes = start_workers(workers)
    try:
        started = time.perf_counter()
        run = do_start_run(experiment)
        while run.attempts.exclude(status__in=[AttemptStatus.COMPLETED, AttemptStatus.FAILED]).exists():
            time.sleep(0.05)
        wall = time.perf_counter() - started
    finally:
        stop_workers(processes, timeout_s=60)
    durations = sorted(
        duration
        for duration in Artifact.objects.filter(attempt__run=run, kind="validation").values_list(
            "duration_ms", flat=True
        )
        if duration is not None
    )
    return {
        "validated": len(durations),
        "wall_s": wall,
        "median_ms": durations[len(durations) // 2] if durations else 0,
        "resolved": run.attempts.filter(resolved=True).count(),
        "sandbox": isolation().describe(),
    }


def textkit_dataset(org):
    """The test repository, built under the bench's own var directory and ingested."""
    from django.conf import settings
    from django.core.management import call_command

    from evaluation.testbed import build_testbed
    from experiments.models import Dataset

    repo = build_testbed(Path(settings.VAR_DIR) / f"textkit-{os.getpid()}")
    call_command(
        "ingest_prs",
        "--org",
        org.slug,
        "--dataset",
        "textkit",
        "--repo",
        str(repo),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    return Dataset.objects.get(org=org, name="textkit")


if __name__ == "__main__":
    raise SystemExit(main())
