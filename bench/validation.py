"""Validations per minute: oracle patches validated by 1 and by 2 workers.

By default the tasks are the textkit test repository's bug fixes (evaluation/testbed.py,
mined with ingest_prs before the clock starts): each validation checks out the base
commit from the repository cache, applies the patch and the task's test patch, byte-
compiles and lints the changed files and runs pytest in the sandbox, as a real run does.
``--tasks demo`` uses the self-contained demo tasks instead. The provider call is a
zero-latency mock, so what is measured is validation and its bookkeeping. With the textkit
tasks it first prints the bare loops the figure is measured against: the same checkout,
patches and pytest (and ruff and py_compile) run one after another with nothing around them.

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
from bench._oracle import timed_oracle_run  # noqa: E402
from bench._settings import production_environment  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=120)
    parser.add_argument("--tasks", choices=["textkit", "demo"], default="textkit")
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # workers: run one case in this process
    args = parser.parse_args()
    if args.case is not None:
        case = bare_loops(args.attempts) if args.case == 0 else run_case(args.attempts, args.case, args.tasks)
        print(json.dumps(case))
        return 0
    print(f"tasks: {args.tasks}")
    bare_rates: list[float] = []
    if args.tasks == "textkit":
        bare = json.loads(_child(args, 0).strip().splitlines()[-1])
        for name, figures in bare.items():
            per_minute = figures["validated"] / figures["wall_s"] * 60
            bare_rates.append(per_minute)
            print(
                f"bare loop, {name}: {figures['validated']} in {figures['wall_s']:.1f}s = {per_minute:.0f}/minute "
                f"({figures['passed']} passed)"
            )
    for workers in (1, 2):
        out = _child(args, workers)
        result = json.loads(out.strip().splitlines()[-1])
        per_minute = result["validated"] / result["wall_s"] * 60
        print(
            f"{workers} worker{'s' if workers > 1 else ''}: {result['validated']} validations in "
            f"{result['wall_s']:.1f}s = {per_minute:.0f} validations/minute "
            f"(median validation {result['median_ms']:.0f} ms; {result['resolved']} resolved; {result['sandbox']})"
        )
        if bare_rates:
            ratios = " and ".join(f"{per_minute / rate:.2f}x" for rate in bare_rates)
            print(f"  against the bare loops: {ratios} (target >= 0.8x)")
    return 0


def _child(args: argparse.Namespace, case: int) -> str:
    """One case in a fresh process (its own database and Redis): 0 is the bare loops."""
    return subprocess.run(
        [sys.executable, __file__, "--attempts", str(args.attempts), "--tasks", args.tasks, "--case", str(case)],
        env=dict(production_environment(), **os.environ),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def bare_loops(attempts: int) -> dict:
    """The work of a validation with none of PRBench around it, one after another: `git archive`
    of the base commit, `git apply` of the gold and test patches, pytest; and the same plus
    ruff twice (before and after, as lint compares findings) and py_compile of the changed
    files. No sandbox, no database, no queue: what a validation could cost at best."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    import tempfile

    from django.core.management import call_command

    from evaluation.patches import check_patch
    from evaluation.repositories import ensure_commit
    from orgs.models import Organization

    call_command("migrate", verbosity=0)
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    tasks = list(textkit_dataset(org).tasks.order_by("position"))
    clones = {t.pk: ensure_commit(t.repo, t.dataset.repo_sources[t.repo], t.base_commit) for t in tasks}

    # The environment a sandboxed command gets: none of this process's (its
    # DJANGO_SETTINGS_MODULE would turn pytest-django on in the task's tests).
    clean = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}

    def one(task, lint: bool) -> bool:
        with tempfile.TemporaryDirectory(prefix="bare-") as root:
            archive = subprocess.run(["git", "archive", task.base_commit], cwd=clones[task.pk], capture_output=True)
            subprocess.run(["tar", "-x", "-C", root], input=archive.stdout, check=True)
            changed = [path for path in check_patch(task.gold_patch).paths if path.endswith(".py")]
            if lint:
                subprocess.run(
                    [sys.executable, "-m", "ruff", "check", "--isolated", "--quiet", *changed], cwd=root, env=clean
                )
            for patch in (task.gold_patch, task.test_patch):
                subprocess.run(["git", "apply", "-"], input=patch.encode(), cwd=root, check=True)
            if lint:
                subprocess.run([sys.executable, "-m", "py_compile", *changed], cwd=root, check=True, env=clean)
                subprocess.run(
                    [sys.executable, "-m", "ruff", "check", "--isolated", "--quiet", *changed], cwd=root, env=clean
                )
            tests = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                cwd=root,
                capture_output=True,
                text=True,
                env=clean,
            )
            if tests.returncode != 0 and not failures:
                failures.append(tests.stdout[-2000:] + tests.stderr[-2000:])
            return tests.returncode == 0

    failures: list[str] = []

    figures = {}
    for name, lint in (("archive + apply + pytest", False), ("and ruff twice + py_compile", True)):
        started = time.perf_counter()
        passed = sum(one(tasks[n % len(tasks)], lint) for n in range(attempts))
        figures[name] = {"validated": attempts, "passed": passed, "wall_s": time.perf_counter() - started}
    if failures:
        print(failures[0], file=sys.stderr)
    return figures


def run_case(attempts: int, workers: int, tasks_from: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from datasets.demo import load_demo_dataset
    from evaluation.sandbox import isolation
    from experiments.models import Artifact
    from orgs.models import Organization
    from prbench.queues import ensure_redis

    ensure_redis()
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = load_demo_dataset(org) if tasks_from == "demo" else textkit_dataset(org)
    tasks = dataset.tasks.count()
    run, wall = timed_oracle_run(org, dataset, f"validation {workers}", max(1, attempts // tasks), workers)
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

    from datasets.models import Dataset
    from evaluation.testbed import build_testbed

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
