"""The demo's own pull-request tasks: twelve small Python modules in ``demo_tasks/``, each
with one real bug, a gold patch and tests."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from datasets.models import Dataset, DatasetKind, TaskInstance
from orgs.models import Organization

DEMO_TASKS_DIR = Path(__file__).resolve().parent / "demo_tasks"
PYTEST_COMMAND = ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml={junit}"]
DEMO_DATASET = "Demo: small Python bugs"


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
