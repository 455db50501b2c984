"""`export_dataset --format swebench`: a dataset of PR tasks as SWE-bench task JSONL."""

import json
from pathlib import Path

import pytest
from django.core.management import CommandError

from datasets.models import Dataset, TaskInstance
from orgs.models import Organization
from tests.cli import run_command
from tests.factories import ingest_textkit

SWEBENCH_FIELDS = [
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
]
LITE_DEV = Path("/work/shared/data/swebench/SWE-bench_Lite_dev.jsonl")


def export(org, dataset: str) -> str:
    return run_command("export_dataset", "--org", org.slug, "--dataset", dataset, "--format", "swebench")


def import_file(org, dataset: str, path) -> None:
    run_command("import_tasks", "--org", org.slug, "--dataset", dataset, "--format", "swebench", str(path))


@pytest.mark.skipif(not LITE_DEV.exists(), reason="SWE-bench Lite's dev split is not on this machine")
def test_an_imported_swebench_file_exports_as_it_came(org):
    import_file(org, "lite", LITE_DEV)
    original = [json.loads(line) for line in LITE_DEV.read_text().splitlines() if line.strip()]
    exported = [json.loads(line) for line in export(org, "lite").splitlines()]
    assert len(exported) == len(original) == 23
    for before, after in zip(original, exported, strict=True):
        assert after == before, before["instance_id"]  # every field, the file's other fields too
        # SWE-bench's own fields in its order; the others as Postgres keeps them (jsonb sorts keys).
        assert list(after)[: len(SWEBENCH_FIELDS)] == list(before)[: len(SWEBENCH_FIELDS)] == SWEBENCH_FIELDS
    assert isinstance(exported[0]["FAIL_TO_PASS"], str) and json.loads(exported[0]["FAIL_TO_PASS"])


def test_a_mined_dataset_exports_and_imports_back(org, plain_textkit, tmp_path):
    ingest_textkit(org, plain_textkit)
    mined = Dataset.objects.get(org=org, name="textkit")
    text = export(org, "textkit")
    lines = [json.loads(line) for line in text.splitlines()]
    tasks = list(mined.tasks.order_by("position"))
    assert [line["instance_id"] for line in lines] == [task.external_id for task in tasks] and len(tasks) >= 3
    first, task = lines[0], tasks[0]
    assert list(first) == [
        "repo",
        "instance_id",
        "base_commit",
        "patch",
        "test_patch",
        "problem_statement",
        "hints_text",
        "version",
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
    ]  # no created_at or environment setup commit known; PRBench's note of where it mined the task left out
    assert first["repo"] == "local/textkit" and first["base_commit"] == task.base_commit
    assert first["patch"] == task.gold_patch and first["test_patch"] == task.test_patch
    assert first["FAIL_TO_PASS"] == json.dumps(task.fail_to_pass) and json.loads(first["PASS_TO_PASS"])
    (tmp_path / "textkit.jsonl").write_text(text)
    import_file(org, "again", tmp_path / "textkit.jsonl")
    fields = ("external_id", "repo", "base_commit", "gold_patch", "test_patch", "problem_statement")
    fields += ("hints_text", "version", "fail_to_pass", "pass_to_pass")
    again = TaskInstance.objects.filter(dataset__name="again").order_by("position")
    assert list(again.values_list(*fields)) == list(mined.tasks.order_by("position").values_list(*fields))
    assert [task.metadata for task in again] == [{}] * len(tasks)


def test_it_checks_ownership(org, tmp_path):
    other = Organization.objects.create(slug="other", name="Other Co")
    import_file(other, "theirs", write_task(tmp_path))
    with pytest.raises(CommandError) as caught:
        export(org, "theirs")
    assert str(caught.value) == "organisation 'acme' has no dataset 'theirs'"
    assert json.loads(export(other, "theirs"))["instance_id"] == "octo__calc-1"


def test_self_contained_tasks_are_refused(org, dataset):
    with pytest.raises(CommandError) as caught:
        export(org, dataset.name)
    message = str(caught.value)
    assert message.startswith(f"nothing exported: dataset {dataset.name!r} has {dataset.tasks.count()} task(s)")
    assert "with no repository or base commit" in message and "a SWE-bench task names both" in message


def write_task(tmp_path) -> Path:
    patch = "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    task = {
        "instance_id": "octo__calc-1",
        "repo": "octo/calc",
        "base_commit": "a" * 40,
        "patch": patch,
        "test_patch": "",
        "problem_statement": "x is wrong",
    }
    path = tmp_path / "task.jsonl"
    path.write_text(json.dumps(task) + "\n")
    return path
