"""Validations per minute: oracle patches validated by 1 and by 2 workers.

By default the tasks are the textkit test repository's bug fixes (evaluation/testbed.py,
mined with ingest_prs before the clock starts): each validation checks out the base
commit from the repository cache, applies the patch and the task's test patch, byte-
compiles and lints the changed files and runs pytest in the sandbox, as a real run does.
``--tasks demo`` uses the self-contained demo tasks instead. The provider call is a
zero-latency mock, so what is measured is validation and its bookkeeping. With the textkit
tasks it first prints the bare loops the figure is measured against: the same checkout,
patches and pytest (and ruff and py_compile) run one after another with nothing around them.

``--tasks textkit-env`` measures what a task environment (evaluation/environments.py) costs:
the same textkit tasks, their dataset given a recipe for the repository (this interpreter's
Python, pytest and its dependencies pinned to the versions installed here, from the package
index: PRBENCH_ENV_INDEX_URL, PyPI when unset). It prints the first build's time and size
(uv's download cache empty), the bare loops run with the environment's interpreter and
variables (as Runtime.surroundings sets them), validations per minute without and with the
environment, and the environment's cost per validation (the difference of the mean
validation times) beside the 50 ms it may add.

    .venv/bin/python bench/validation.py [--attempts 120] [--tasks textkit|textkit-env|demo]

Runs on the `make demo` stores (SQLite under a fresh directory, embedded Redis) with
production settings, unless DATABASE_URL / REDIS_URL are set.
"""

from __future__ import annotations

import argparse
import io
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
from bench._settings import production_environment, remove_tree, temporary_directory  # noqa: E402

BUILD_CASE = -1  # the environment's first build, before any case that uses it
PAIRED_CASE = -2  # the same validations in turn without and in the environment, in one process
OVERHEAD_TARGET_MS = 50  # what a cached environment may add to a validation (issue 28)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=120)
    parser.add_argument("--tasks", choices=["textkit", "textkit-env", "demo"], default="textkit")
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # workers: run one case in this process
    args = parser.parse_args()
    if args.case is not None:
        if args.case == BUILD_CASE:
            case = first_build()
        elif args.case == PAIRED_CASE:
            case = paired_validations(args.attempts)
        elif args.case == 0:
            case = bare_loops(args.attempts, in_environment=args.tasks == "textkit-env")
        else:
            case = run_case(args.attempts, args.case, args.tasks)
        print(json.dumps(case))
        return 0
    if args.tasks == "textkit-env":
        return environment_cases(args)
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


def environment_cases(args: argparse.Namespace) -> int:
    """The textkit tasks without and then in their environment, which the first case builds
    into a cache every later case shares (as a worker's cache is shared by its runs)."""
    cache = Path(temporary_directory("prbench-bench-environments-"))
    cache.chmod(0o755)  # the sandbox users reach the environment through it
    shared = {"PRBENCH_ENV_CACHE_DIR": str(cache)}
    try:
        built = json.loads(_child(args, BUILD_CASE, variables=shared).strip().splitlines()[-1])
        packages = " ".join(built["packages"])
        print(f"tasks: textkit, without and in an environment (Python {built['python']}: {packages})")
        print(
            f"first build: {built['seconds']:.1f}s, {built['size_bytes'] / 1024**2:.1f} MB "
            f"(uv, from {built['index']}, its download cache empty); then found cached in "
            f"{built['cached_lookup_ms']:.1f} ms"
        )
        bare = json.loads(_child(args, 0, variables=shared).strip().splitlines()[-1])
        bare_rates: dict[str, list[float]] = {"without": [], "in": []}
        for name, figures in bare.items():
            per_minute = figures["validated"] / figures["wall_s"] * 60
            bare_rates["in" if name.endswith("in the environment") else "without"].append(per_minute)
            print(
                f"bare loop, {name}: {figures['validated']} in {figures['wall_s']:.1f}s = {per_minute:.0f}/minute "
                f"({figures['passed']} passed)"
            )
        for workers in (1, 2):
            results = {}
            for where, tasks in (("without", "textkit"), ("in", "textkit-env")):
                result = json.loads(_child(args, workers, tasks, shared).strip().splitlines()[-1])
                results[where] = result
                per_minute = result["validated"] / result["wall_s"] * 60
                ratios = " and ".join(f"{per_minute / rate:.2f}x" for rate in bare_rates[where])
                print(
                    f"{workers} worker{'s' if workers > 1 else ''}, {where} the environment: {result['validated']} "
                    f"validations in {result['wall_s']:.1f}s = {per_minute:.0f} validations/minute (validation "
                    f"median {result['median_ms']:.0f} ms, mean {result['mean_ms']:.0f} ms; {result['resolved']} "
                    f"resolved); against the bare loops {where} the environment: {ratios}"
                )
            overhead = results["in"]["mean_ms"] - results["without"]["mean_ms"]
            wall = {where: result["wall_s"] / max(1, result["validated"]) * 1000 for where, result in results.items()}
            print(
                f"  the environment's cost per validation: {overhead:+.0f} ms (mean validation in it minus without; "
                f"target <= {OVERHEAD_TARGET_MS} ms); wall time per validation {wall['in'] - wall['without']:+.0f} ms"
            )
        paired = json.loads(_child(args, PAIRED_CASE, variables=shared).strip().splitlines()[-1])
        print(
            f"paired, one validation at a time (no queue), {paired['pairs']} pairs: without the environment "
            f"mean {paired['without_ms']:.0f} ms, in it {paired['in_ms']:.0f} ms; the environment's cost "
            f"{paired['difference_ms']:+.0f} ms +- {paired['margin_ms']:.0f} ms "
            f"(95%; target <= {OVERHEAD_TARGET_MS} ms)"
        )
        print(built["sandbox"])
    finally:
        remove_tree(cache)
    return 0


def first_build() -> dict:
    """The textkit tasks' environment built from scratch (timed), then found in the cache."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from datasets.environments import do_build, key_for, recipe_for, runtime_for
    from evaluation.sandbox import isolation
    from orgs.models import Organization

    call_command("migrate", verbosity=0)
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = textkit_dataset(org)
    add_recipe(dataset)
    task = dataset.tasks.select_related("dataset").order_by("position").first()
    recipe = recipe_for(task)
    assert recipe is not None
    built = do_build(task, recipe, key_for(task, recipe))
    lookups = []
    for _ in range(20):  # what finding the built environment costs a validation
        started = time.perf_counter()
        runtime_for(task)
        lookups.append((time.perf_counter() - started) * 1000)
    return {
        "seconds": built.seconds,
        "size_bytes": built.size_bytes,
        "python": recipe.python,
        "packages": recipe.packages,
        "index": settings.PRBENCH_ENV_INDEX_URL or "PyPI",
        "cached_lookup_ms": statistics.median(lookups),
        "sandbox": isolation().describe(),
    }


def paired_validations(attempts: int) -> dict:
    """Each task's gold patch validated without its environment and in it, alternately (which
    goes first alternates too), one at a time: the machine's load drifts alike for both."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from datasets.environments import runtime_for
    from datasets.validation import validate_task
    from orgs.models import Organization

    call_command("migrate", verbosity=0)
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = textkit_dataset(org)
    add_recipe(dataset)
    tasks = list(dataset.tasks.select_related("dataset").order_by("position"))
    environment = runtime_for(tasks[0])
    differences: list[int] = []
    durations: dict[str, list[int]] = {"without": [], "in": []}
    for n in range(attempts):
        task = tasks[n % len(tasks)]
        order = ("without", "in") if n % 2 == 0 else ("in", "without")
        took = {}
        for where in order:
            # What the pipeline's prepare_environments leaves on a task: None is the worker's Python.
            task.prepared_environment = environment if where == "in" else None
            result = validate_task(task, task.gold_patch)
            assert result.passed, result.log
            took[where] = result.duration_ms
            durations[where].append(result.duration_ms)
        differences.append(took["in"] - took["without"])
    return {
        "pairs": attempts,
        "without_ms": statistics.fmean(durations["without"]),
        "in_ms": statistics.fmean(durations["in"]),
        "difference_ms": statistics.fmean(differences),
        "margin_ms": 1.96 * statistics.stdev(differences) / len(differences) ** 0.5 if attempts > 1 else 0.0,
    }


def add_recipe(dataset) -> None:
    """An environment for the dataset's repository: this interpreter's Python with pytest and
    its dependencies at the versions installed here; the project itself is not installed
    (textkit has no packaging: its checkout is its import root)."""
    from datasets.models import EnvironmentRecipe

    for repo in set(dataset.tasks.values_list("repo", flat=True)):
        EnvironmentRecipe.objects.update_or_create(
            dataset=dataset,
            repo=repo,
            version="",
            defaults={
                "python": f"{sys.version_info.major}.{sys.version_info.minor}",
                "packages": installed_pins("pytest"),
                "project": "",
                "source": "bench/validation.py",
            },
        )


def tasks_environment(dataset):
    """The Runtime the dataset's tasks validate in (its recipe added; built if need be)."""
    from datasets.environments import runtime_for

    add_recipe(dataset)
    found = runtime_for(dataset.tasks.select_related("dataset").order_by("position").first())
    assert found is not None
    return found[1]


def installed_pins(name: str) -> list[str]:
    """``name`` and what it requires on this interpreter, each pinned to the version installed."""
    from importlib.metadata import distribution

    from packaging.requirements import Requirement

    pins: dict[str, str] = {}
    wanted = [name]
    while wanted:
        found = distribution(wanted.pop())
        key = found.metadata["Name"].lower()
        if key in pins:
            continue
        pins[key] = f"{key}=={found.version}"
        for line in found.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return [pins[key] for key in sorted(pins)]


def _child(args: argparse.Namespace, case: int, tasks: str = "", variables: dict[str, str] | None = None) -> str:
    """One case in a fresh process (its own database and Redis): 0 is the bare loops."""
    tasks = tasks or args.tasks
    return subprocess.run(
        [sys.executable, __file__, "--attempts", str(args.attempts), "--tasks", tasks, "--case", str(case)],
        env=dict(production_environment(), **os.environ, **(variables or {})),
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def bare_loops(attempts: int, in_environment: bool = False) -> dict:
    """The work of a validation with none of PRBench around it, one after another: `git archive`
    of the base commit, `git apply` of the gold and test patches, pytest; and the same plus
    ruff twice (before and after, as lint compares findings) and py_compile of the changed
    files. No sandbox, no database, no queue: what a validation could cost at best.
    ``in_environment``: both loops again, pytest and py_compile run by the tasks' environment's
    interpreter with the variables Runtime.surroundings gives a validation (ruff stays the
    worker's, as a validation's lint does)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from evaluation.patches import check_patch
    from evaluation.repositories import ensure_commit
    from orgs.models import Organization

    call_command("migrate", verbosity=0)
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = textkit_dataset(org)
    tasks = list(dataset.tasks.order_by("position"))
    clones = {t.pk: ensure_commit(t.repo, t.dataset.repo_sources[t.repo], t.base_commit) for t in tasks}

    # The environment a sandboxed command gets: none of this process's (its
    # DJANGO_SETTINGS_MODULE would turn pytest-django on in the task's tests).
    clean = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}

    def one(task, lint: bool, environment=None) -> bool:
        with tempfile.TemporaryDirectory(prefix="bare-") as root:
            python = environment.python if environment else sys.executable
            env = {**clean, **dict(environment.surroundings(root).variables)} if environment else clean
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
                subprocess.run([python, "-m", "py_compile", *changed], cwd=root, check=True, env=env)
                subprocess.run(
                    [sys.executable, "-m", "ruff", "check", "--isolated", "--quiet", *changed], cwd=root, env=clean
                )
            tests = subprocess.run(
                [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                cwd=root,
                capture_output=True,
                text=True,
                env=env,
            )
            if tests.returncode != 0 and not failures:
                failures.append(tests.stdout[-2000:] + tests.stderr[-2000:])
            return tests.returncode == 0

    failures: list[str] = []

    loops = [("archive + apply + pytest", False, None), ("and ruff twice + py_compile", True, None)]
    if in_environment:
        environment = tasks_environment(dataset)
        loops += [(f"{name}, in the environment", lint, environment) for name, lint, _ in loops]
    figures = {}
    for name, lint, environment in loops:
        started = time.perf_counter()
        passed = sum(one(tasks[n % len(tasks)], lint, environment) for n in range(attempts))
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
    if tasks_from == "textkit-env":
        tasks_environment(dataset)  # built by the first-build case, found in the shared cache
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
        "mean_ms": statistics.fmean(durations) if durations else 0,
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
