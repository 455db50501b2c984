"""`export_run --format swebench-preds | swebench-report`."""

import json

import pytest
from django.core.management import CommandError

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import AttemptStatus
from tests.conftest import work_queue
from tests.experiments.test_commands import run_command


@pytest.fixture
def finished_run(experiment, django_capture_on_commit_callbacks):
    def finish(arms=None, repetitions=1, inference_only=False):
        if arms:
            do_replace_arms(experiment, arms)
        experiment.repetitions = repetitions
        experiment.save()
        with django_capture_on_commit_callbacks(execute=True):
            run = do_start_run(experiment, inference_only=inference_only)
        work_queue()
        run.refresh_from_db()
        return run

    return finish


def test_predictions_are_one_line_per_attempt_in_swebench_fields(finished_run):
    run = finished_run()
    lines = run_command("export_run", str(run.code), "--format", "swebench-preds").splitlines()
    predictions = [json.loads(line) for line in lines]
    assert len(predictions) == run.total_attempts == 8
    assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in predictions)
    gold = {a.task.external_id: a.task.gold_patch for a in run.attempts.select_related("task")}
    oracle = [p for p in predictions if p["model_name_or_path"] == "oracle"]
    assert len(oracle) == 4 and all(p["model_patch"] == gold[p["instance_id"]] for p in oracle)
    assert {p["model_name_or_path"] for p in predictions} == {"oracle", "noisy"}


def test_the_report_sorts_every_instance_into_swebench_lists(finished_run):
    run = finished_run()
    report = json.loads(run_command("export_run", str(run.code), "--format", "swebench-report"))
    assert report["run_id"] == str(run.code) and report["unfinished_instances"] == 0
    oracle, noisy = report["models"]["oracle"], report["models"]["noisy"]
    tasks = sorted(run.attempts.filter(arm__label="oracle").values_list("task__external_id", flat=True))
    assert oracle["resolved_ids"] == tasks and oracle["resolved_instances"] == 4 and oracle["total_instances"] == 4
    resolved = sorted(
        run.attempts.filter(arm__label="noisy", resolved=True).values_list("task__external_id", flat=True)
    )
    assert noisy["resolved_ids"] == resolved
    lists = ("resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids")
    assert sorted(i for key in lists for i in noisy[key]) == tasks  # each instance in exactly one list


def test_failures_are_errors_and_repetitions_are_separate_models(finished_run):
    arms = [
        ArmSpec("down", "mock", "m", {"mode": "error", "max_retries": 0}),
        ArmSpec("mute", "mock", "m", {"mode": "empty"}),
    ]
    run = finished_run(arms, repetitions=2)
    assert not run.attempts.exclude(status__in=[AttemptStatus.COMPLETED, AttemptStatus.FAILED]).exists()
    report = json.loads(run_command("export_run", str(run.code), "--format", "swebench-report"))
    assert set(report["models"]) == {"down@rep0", "down@rep1", "mute@rep0", "mute@rep1"}
    assert report["models"]["down@rep1"]["error_instances"] == 4
    assert report["models"]["mute@rep0"]["empty_patch_instances"] == 4
    predictions = run_command("export_run", str(run.code), "--format", "swebench-preds").splitlines()
    pairs = [(json.loads(p)["instance_id"], json.loads(p)["model_name_or_path"]) for p in predictions]
    assert len(pairs) == len(set(pairs)) == 16  # one prediction per instance and model, as SWE-bench expects


def test_an_inference_only_run_has_no_report(finished_run):
    run = finished_run(inference_only=True)
    with pytest.raises(CommandError) as caught:
        run_command("export_run", str(run.code), "--format", "swebench-report")
    assert "was inference-only: no patch was validated" in str(caught.value)
