"""A dataset of PR tasks, imported or mined, as SWE-bench task JSONL: one instance a line, with
the fields and spellings SWE-bench publishes (FAIL_TO_PASS and PASS_TO_PASS as JSON strings
of a list), so a file imported with `import_tasks` exports as it came in."""

from __future__ import annotations

import json
from collections.abc import Iterator

from django.core.exceptions import ValidationError
from django.db.models import Q

from datasets.models import Dataset

# SWE-bench's fields in the order its published files list them; created_at and
# environment_setup_commit only where the task's source gave them (a mined task has neither).
FIELDS = (
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
)
WHEN_KNOWN = ("created_at", "environment_setup_commit")
TASK_COLUMNS = (
    "repo",
    "external_id",
    "base_commit",
    "gold_patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "version",
    "fail_to_pass",
    "pass_to_pass",
    "metadata",
)
# ingest_prs records where it mined a task in its metadata: PRBench's own note, not a field of
# the task's source, so it is not exported (an imported task's metadata is its file's other
# fields, exported as they came).
MINED = ("source", "ingest_prs")
CHUNK_TASKS = 200  # a task carries two patches and a problem statement: tens of kilobytes


def check_swebench_exportable(dataset: Dataset) -> None:
    """Refuse what SWE-bench cannot describe: tasks with no repository at a base commit (the
    demo's self-contained tasks, whose files are in the database)."""
    without_repo = dataset.tasks.filter(Q(repo="") | Q(base_commit=""))
    if missing := list(without_repo.order_by("position", "external_id").values_list("external_id", flat=True)[:5]):
        count = without_repo.count()
        raise ValidationError(
            f"dataset {dataset.name!r} has {count} task(s) with no repository or base commit "
            f"(self-contained tasks, such as {', '.join(repr(task) for task in missing)}): "
            "a SWE-bench task names both"
        )


def swebench_task_lines(dataset: Dataset) -> Iterator[str]:
    """The dataset's tasks in its order, a JSONL line each, read a chunk at a time."""
    rows = dataset.tasks.order_by("position", "external_id").values_list(*TASK_COLUMNS)
    for row in rows.iterator(chunk_size=CHUNK_TASKS):
        yield json.dumps(swebench_task(dict(zip(TASK_COLUMNS, row, strict=True)))) + "\n"


def swebench_task(task: dict) -> dict:
    metadata = task["metadata"] or {}
    extra = {} if metadata.get(MINED[0]) == MINED[1] else metadata
    known = {
        "repo": task["repo"],
        "instance_id": task["external_id"],
        "base_commit": task["base_commit"],
        "patch": task["gold_patch"],
        "test_patch": task["test_patch"],
        "problem_statement": task["problem_statement"],
        "hints_text": task["hints_text"],
        "created_at": extra.get("created_at"),
        "version": task["version"],
        # As SWE-bench publishes them: a JSON list, written as a string.
        "FAIL_TO_PASS": json.dumps(task["fail_to_pass"]),
        "PASS_TO_PASS": json.dumps(task["pass_to_pass"]),
        "environment_setup_commit": extra.get("environment_setup_commit"),
    }
    fields = {name: known[name] for name in FIELDS if not (name in WHEN_KNOWN and known[name] is None)}
    return {**fields, **{key: value for key, value in extra.items() if key not in known}}
