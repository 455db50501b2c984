"""Dataset versions: each import into a dataset that holds tasks makes the next version (its
tasks belong to it); a run records the version it started on and uses no task of a later one."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from datasets.imports import TaskFile, do_import_task_file, parse_task_file
from datasets.models import Dataset, TaskInstance
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from tests.cli import run_command
from tests.conftest import client_for
from tests.samples import SWEBENCH_LITE_LINES, write_lines


def import_lines(org, tmp_path, lines, name="tasks.jsonl"):
    return run_command(
        "import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench",
        "--repo-source", "sqlfluff/sqlfluff=/srv/x", write_lines(tmp_path, lines, name),
    )  # fmt: skip


def inference_experiment(org, dataset):
    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    return do_save_experiment(org, ExperimentSpec(name="versions", dataset=dataset, arms=arms))


def test_reimporting_makes_a_new_version_and_each_run_records_its_own(org, alice, tmp_path, start):
    out = import_lines(org, tmp_path, SWEBENCH_LITE_LINES[:5])
    assert "Created dataset 'lite': 5 task(s) from 1 repositories as version 1" in out
    dataset = Dataset.objects.get()
    experiment = inference_experiment(org, dataset)
    first = start(experiment, inference_only=True)

    out = import_lines(org, tmp_path, SWEBENCH_LITE_LINES[5:8], "more.jsonl")
    second = start(experiment, inference_only=True)

    assert "Added to dataset 'lite': 3 task(s)" in out and "as version 2" in out
    dataset.refresh_from_db()
    assert dataset.version == 2
    by_version = dict(dataset.tasks.values_list("external_id", "dataset_version"))
    assert sorted(by_version.values()) == [1] * 5 + [2] * 3
    assert (first.dataset_version, second.dataset_version) == (1, 2)
    assert first.attempts.values("task").distinct().count() == 5
    assert second.attempts.values("task").distinct().count() == 8
    page = client_for(alice).get(reverse("experiments:run", args=[first.code])).content.decode()
    assert "version 1 (now at version 2)" in page
    page = client_for(alice).get(reverse("datasets:detail", args=[dataset.code])).content.decode()
    assert "version 2</small>" in page and "2 versions" in page


def test_a_run_uses_no_task_of_a_version_it_did_not_start_on(org, tmp_path, start):
    import_lines(org, tmp_path, SWEBENCH_LITE_LINES[:3])
    dataset = Dataset.objects.get()
    experiment = inference_experiment(org, dataset)
    # A task of version 2 whose import has not (as far as this run can tell) committed its version yet.
    TaskInstance.objects.create(dataset=dataset, external_id="later", problem_statement="x", dataset_version=2)

    run = start(experiment, inference_only=True)

    assert run.dataset_version == 1
    assert not run.attempts.filter(task__external_id="later").exists()
    assert run.attempts.count() == 3


def test_the_first_tasks_of_a_dataset_are_its_version_1(org, tmp_path):
    Dataset.objects.create(org=org, name="lite")  # made, but empty (say, mining rejected everything)

    import_lines(org, tmp_path, SWEBENCH_LITE_LINES[:2])

    dataset = Dataset.objects.get()
    assert dataset.version == 1 and set(dataset.tasks.values_list("dataset_version", flat=True)) == {1}


def test_a_failed_import_makes_no_version(org, tmp_path):
    import_lines(org, tmp_path, SWEBENCH_LITE_LINES[:2])

    with pytest.raises(Exception, match="already in dataset"):
        import_lines(org, tmp_path, SWEBENCH_LITE_LINES[1:3], "again.jsonl")

    assert Dataset.objects.get().version == 1 and TaskInstance.objects.count() == 2


def test_swebench_tasks_cannot_go_into_a_question_dataset(org, tmp_path):
    Dataset.objects.create(org=org, name="quiz", kind="qa_exact")
    spec = TaskFile(format="swebench", name="tasks.jsonl", dataset_name="quiz")
    with open(write_lines(tmp_path, SWEBENCH_LITE_LINES[:2]), "rb") as handle:
        tasks = parse_task_file(spec, handle)

    with pytest.raises(ValidationError, match=r"holds Question and answer .* tasks; this file's are pr_patch"):
        do_import_task_file(org, spec, tasks)

    assert not TaskInstance.objects.exists()
