"""The shipped demo: a dataset of 12 small real bugs and an experiment with three mock arms."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from experiments.actions import check_experiment_spec, do_apply_experiment
from experiments.models import Dataset, DatasetKind, Experiment, TaskInstance
from orgs.models import Organization

DEMO_TASKS_DIR = Path(__file__).resolve().parent / "demo_tasks"
PYTEST_COMMAND = ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml={junit}"]
DEMO_DATASET = "Demo: small Python bugs"
DEMO_EXPERIMENT = "Demo: three mock arms"

DEMO_ARMS = [
    {
        "label": "oracle",
        "provider": "mock",
        "model_name": "mock-oracle",
        "config": {
            "mode": "oracle",
            "latency_ms": 120,
            "jitter_ms": 80,
            "price_input_per_mtok": 3.0,
            "price_output_per_mtok": 15.0,
        },
    },
    {
        "label": "careful",
        "provider": "mock",
        "model_name": "mock-careful",
        "config": {
            "mode": "noisy",
            "quality": 0.75,
            "latency_ms": 300,
            "jitter_ms": 200,
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 5.0,
        },
    },
    {
        "label": "cheap-flaky",
        "provider": "mock",
        "model_name": "mock-cheap",
        "config": {
            "mode": "noisy",
            "quality": 0.4,
            "latency_ms": 60,
            "jitter_ms": 40,
            "failure_rate": 0.35,
            "failure_category": "server_error",
            "max_retries": 1,
            "retry_base_ms": 50,
            "price_input_per_mtok": 0.15,
            "price_output_per_mtok": 0.6,
        },
    },
]


def read_task_dir(path: Path, position: int) -> dict:
    """One task folder: problem.md (title on the first line), gold.patch and repo/."""
    problem = (path / "problem.md").read_text()
    repo = path / "repo"
    files = {
        str(f.relative_to(repo)): f.read_text()
        for f in sorted(repo.rglob("*"))
        if f.is_file() and "__pycache__" not in f.parts
    }
    return {
        "external_id": path.name,
        "position": position,
        "title": problem.splitlines()[0].strip(),
        "problem_statement": problem,
        "repo_files": files,
        "gold_patch": (path / "gold.patch").read_text(),
        "test_command": PYTEST_COMMAND,
    }


def demo_task_dirs() -> list[Path]:
    return sorted(p for p in DEMO_TASKS_DIR.iterdir() if p.is_dir())


@transaction.atomic
def load_demo_dataset(org: Organization) -> Dataset:
    dataset, _ = Dataset.objects.update_or_create(
        org=org,
        name=DEMO_DATASET,
        defaults={
            "kind": DatasetKind.PR_PATCH,
            "description": "Twelve self-contained Python modules, each with one real bug, a gold patch and tests.",
        },
    )
    for position, path in enumerate(demo_task_dirs()):
        fields = read_task_dir(path, position)
        TaskInstance.objects.update_or_create(dataset=dataset, external_id=fields.pop("external_id"), defaults=fields)
    return dataset


def load_demo_experiment(org: Organization, user=None) -> Experiment:
    dataset = load_demo_dataset(org)
    spec = check_experiment_spec(
        org,
        {
            "name": DEMO_EXPERIMENT,
            "dataset": dataset.name,
            "seed": 7,
            "repetitions": 1,
            "arms": DEMO_ARMS,
            "description": "An oracle, a careful model and a cheap, flaky one, all simulated.",
        },
    )
    experiment, _ = do_apply_experiment(org, spec, user)
    return experiment
