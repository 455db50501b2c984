"""HumanEval through the sandbox: the canonical solutions, then validations per minute.

First every canonical solution (and the mock's two wrong answers) runs in the sandbox one
after another, as code_exec evaluates an answer, with nothing else around it: how many pass
of how many, and the time a program takes. Beside it, the reference: the same programs run
bare, one after another, each ``python -I program.py`` in a fresh directory with
``subprocess`` and no sandbox, so what the sandbox adds to a program shows. Then a run of the
oracle mock arm on the whole of HumanEval, imported with ``import_tasks --format humaneval``,
goes through the pipeline with 1 and then 2 workers: validations per minute (each a program
run in the sandbox, its answer recorded), beside the bare loop's programs per minute. The
provider call is a zero-latency mock, so what is measured is running programs and the
bookkeeping around them.

    .venv/bin/python bench/humaneval.py [--repetitions 2] [--file tests/data/humaneval/HumanEval.jsonl.gz]

Each case runs in a fresh process on the `make demo` stores (SQLite under a fresh directory,
embedded Redis) with production settings, unless DATABASE_URL / REDIS_URL are set.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._oracle import timed_oracle_run  # noqa: E402
from bench._settings import production_environment  # noqa: E402

HUMANEVAL = ROOT / "tests" / "data" / "humaneval" / "HumanEval.jsonl.gz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=2, help="of each task in the pipeline runs")
    parser.add_argument("--file", type=Path, default=HUMANEVAL)
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # workers: run one case in this process
    args = parser.parse_args()
    if args.case is not None:
        result = sandbox_loop(args.file) if args.case == 0 else pipeline_run(args.file, args.case, args.repetitions)
        print(json.dumps(result))
        return 0
    loop = json.loads(_child(args, 0).strip().splitlines()[-1])
    bare = loop["bare"]
    bare_per_minute = bare["total"] / bare["wall_s"] * 60
    print(loop["sandbox"])
    print(
        f"canonical solutions through the sandbox: {loop['passed']}/{loop['total']} passed in {loop['wall_s']:.1f}s "
        f"= {loop['total'] / loop['wall_s'] * 60:.0f} programs/minute, one at a time "
        f"(median program {loop['median_ms']:.0f} ms)"
    )
    print(
        f"  the same programs bare (subprocess, no sandbox): {bare['passed']}/{bare['total']} passed in "
        f"{bare['wall_s']:.1f}s = {bare_per_minute:.0f} programs/minute, one at a time (median program "
        f"{bare['median_ms']:.0f} ms): the sandbox adds {loop['median_ms'] - bare['median_ms']:.0f} ms a program "
        f"and runs {bare['wall_s'] / loop['wall_s']:.2f}x as many programs a minute as bare"
    )
    print(f"the mock's wrong answers: {loop['wrong_passed']} of {loop['wrong_total']} passed (should be 0)")
    if loop["failures"]:
        print("failing canonical solutions:", ", ".join(loop["failures"]))
    for workers in (1, 2):
        result = json.loads(_child(args, workers).strip().splitlines()[-1])
        per_minute = result["validated"] / result["wall_s"] * 60
        print(
            f"{workers} worker{'s' if workers > 1 else ''}: {result['validated']} validations in "
            f"{result['wall_s']:.1f}s = {per_minute:.0f} validations/minute "
            f"(median program {result['median_ms']:.0f} ms; {result['passed']} passed); "
            f"{per_minute / bare_per_minute:.2f}x the bare loop's {bare_per_minute:.0f} programs/minute"
        )
    return 0


def _child(args: argparse.Namespace, case: int) -> str:
    """One case in a fresh process (its own database and Redis): 0 is the bare sandbox loop."""
    command = [sys.executable, __file__, "--repetitions", str(args.repetitions), "--file", str(args.file)]
    return subprocess.run(
        [*command, "--case", str(case)],
        env=dict(production_environment(), **os.environ),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()


def sandbox_loop(path: Path) -> dict:
    """Every canonical solution and wrong answer evaluated in turn, as code_exec does."""
    _setup()
    from types import SimpleNamespace

    from django.conf import settings

    from evaluation.sandbox import isolation
    from evaluation.workloads import workload_for
    from evaluation.workloads.base import Context
    from evaluation.workloads.code_exec import build_program

    workload = workload_for("code_exec")
    data = path.read_bytes()
    text = gzip.decompress(data) if data.startswith(b"\x1f\x8b") else data
    problems = [json.loads(line) for line in text.splitlines() if line.strip()]
    fields = ("prompt", "entry_point", "test", "canonical_solution")
    tasks = [(p["task_id"], SimpleNamespace(payload={f: p[f] for f in fields})) for p in problems]
    durations, failures = [], []
    started = time.perf_counter()
    for task_id, task in tasks:
        evaluation = workload.evaluate(task, workload.reference_output(task), Context())
        durations.append(json.loads(evaluation.artifacts[0].content)["duration_ms"])
        if not evaluation.correct:
            failures.append(task_id)
    wall = time.perf_counter() - started
    wrong = [workload.evaluate(t, d, Context()).correct for _, t in tasks for d in workload.distractors(t)]
    programs = [build_program(task.payload, workload.reference_output(task))[0] for _, task in tasks]
    return {
        "bare": bare_loop(programs, settings.PRBENCH_CODE_EXEC_TIMEOUT_SECONDS),
        "total": len(tasks),
        "passed": len(tasks) - len(failures),
        "failures": failures,
        "wall_s": wall,
        "median_ms": statistics.median(durations),
        "wrong_total": len(wrong),
        "wrong_passed": sum(bool(correct) for correct in wrong),
        "sandbox": isolation().describe(),
    }


def bare_loop(programs: list[str], timeout_s: float) -> dict:
    """The reference: each program run as the sandbox runs it, but bare: the same Python in
    isolated mode (-I), in a fresh directory of its own, one after another."""
    durations, passed = [], 0
    started = time.perf_counter()
    for program in programs:
        with tempfile.TemporaryDirectory(prefix="prbench-bare-") as workdir:
            Path(workdir, "program.py").write_text(program, encoding="utf-8")
            began = time.perf_counter()
            try:
                done = subprocess.run(
                    [sys.executable, "-I", "program.py"], cwd=workdir, capture_output=True, timeout=timeout_s
                )
                passed += done.returncode == 0
            except subprocess.TimeoutExpired:
                pass
            durations.append((time.perf_counter() - began) * 1000)
    return {
        "total": len(programs),
        "passed": passed,
        "wall_s": time.perf_counter() - started,
        "median_ms": statistics.median(durations),
    }


def pipeline_run(path: Path, workers: int, repetitions: int) -> dict:
    """The oracle mock arm on every HumanEval task, ``repetitions`` times, with ``workers``."""
    _setup()
    import io

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from datasets.models import Dataset
    from experiments.models import Artifact
    from orgs.models import Organization
    from prbench.queues import ensure_redis

    ensure_redis()
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    call_command(
        "import_tasks", "--org", org.slug, "--dataset", "humaneval", "--format", "humaneval", str(path),
        stdout=io.StringIO(),
    )  # fmt: skip
    dataset = Dataset.objects.get(org=org, name="humaneval")
    run, wall = timed_oracle_run(org, dataset, f"humaneval {workers}", repetitions, workers)
    answers = Artifact.objects.filter(attempt__run=run, kind="answer")
    durations = [ms for ms in answers.values_list("duration_ms", flat=True) if ms is not None]
    return {
        "validated": len(durations),
        "wall_s": wall,
        "median_ms": statistics.median(durations) if durations else 0,
        "passed": run.attempts.filter(resolved=True).count(),
    }


if __name__ == "__main__":
    raise SystemExit(main())
