"""`import_predictions`: another system's SWE-bench predictions as a replay arm, validated and
scored like a live arm's; a task the file has nothing for is "no answer"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError
from django.urls import reverse

from datasets.demo import load_demo_dataset
from experiments.actions import check_experiment_spec
from experiments.models import Attempt, AttemptStatus, ModelArm, Prediction, PredictionSet
from experiments.replay import REPLAYED_MESSAGE
from experiments.swebench_export import swebench_report
from leaderboards.models import ArmSummary
from leaderboards.summaries import refresh_run_summaries
from orgs.models import Organization
from providers.errors import ErrorCategory
from providers.models import AllowedProvider
from providers.outcomes import OutcomeClass
from tests.cli import run_command
from tests.conftest import client_for, work_queue
from tests.factories import SYSTEM, import_into, predictions_file, published_line


def run_it(experiment, start):
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    return run


def test_the_import_adds_a_replay_arm_and_says_what_it_kept(four_tasks, tmp_path):
    experiment, tasks = four_tasks
    out = import_into(experiment, predictions_file(tmp_path, tasks))
    arm = experiment.arms.get(label="agent")
    prediction_set = PredictionSet.objects.get()
    assert (arm.provider, arm.model_name, arm.config) == ("replay", SYSTEM, {"predictions": prediction_set.pk})
    assert (prediction_set.count, prediction_set.ignored, prediction_set.org_id) == (3, 1, experiment.org_id)
    assert {p.instance_id: p.line for p in Prediction.objects.all()} == {
        t.external_id: n for n, t in enumerate(tasks[:3], 1)
    }
    assert "3 prediction(s)" in out and "1 of them empty" in out
    assert "1 prediction(s) for instances not in the dataset were left out: astropy__astropy-12907" in out
    dataset_size = experiment.dataset.tasks.count()
    assert f"{dataset_size - 3} task(s) of the dataset have no prediction" in out


def test_replayed_patches_are_validated_and_scored_like_a_live_arms(four_tasks, tmp_path, start):
    experiment, tasks = four_tasks
    import_into(experiment, predictions_file(tmp_path, tasks))
    run = run_it(experiment, start)
    attempts = {a.task.external_id: a for a in run.attempts.filter(arm__label="agent").select_related("task")}
    gold, harmless, null, missing = (attempts[t.external_id] for t in tasks)

    assert gold.status == AttemptStatus.COMPLETED and gold.resolved is True and gold.patch_applied is True
    assert gold.output == tasks[0].gold_patch and gold.model_served == SYSTEM
    assert harmless.status == AttemptStatus.COMPLETED and harmless.patch_applied is True and harmless.resolved is False
    assert null.status == AttemptStatus.COMPLETED and null.patch_present is False and null.resolved is False
    assert (missing.status, missing.error_category, missing.outcome) == (
        AttemptStatus.FAILED,
        ErrorCategory.NO_ANSWER,
        OutcomeClass.MODEL_FAILURE,
    )
    # No time of ours and no cost anyone knows: unknown, never zero.
    for answered in (gold, harmless, null):
        assert answered.latency_ms is None and answered.wall_ms is None and answered.first_token_ms is None
        assert answered.cost_usd is None and answered.input_tokens is None and answered.output_tokens is None
        assert answered.request["messages"] == [{"role": "user", "content": REPLAYED_MESSAGE.content}]
        assert "recorded_answer" not in answered.request
    # The live arm of the same run is untouched by the replay beside it.
    assert run.attempts.filter(arm__label="oracle", resolved=True).count() == 4

    refresh_run_summaries(run.pk)
    summary = ArmSummary.objects.get(arm__run=run, arm__label="agent")
    assert (summary.scored, summary.resolved, summary.model_failures, summary.infrastructure_failures) == (4, 1, 1, 0)
    assert summary.latency_measured == 0


def test_the_harness_files_read_back_what_was_imported(four_tasks, tmp_path, start):
    experiment, tasks = four_tasks
    path = predictions_file(tmp_path, tasks)
    import_into(experiment, path)
    run = run_it(experiment, start)
    exported = run_command("export_run", str(run.code), "--format", "swebench-preds", "--arm", "agent")
    imported = [json.loads(line) for line in Path(path).read_text().splitlines()][:3]
    by_id = {p["instance_id"]: p for p in map(json.loads, exported.splitlines())}
    # What the file said, line for line; the instance it left out is still left out.
    assert sorted(by_id) == sorted(p["instance_id"] for p in imported)
    for line in imported:
        assert by_id[line["instance_id"]]["model_patch"] == (line["model_patch"] or "")
    report = swebench_report(run)["agent"]
    assert report["resolved_ids"] == [tasks[0].external_id]
    assert report["unresolved_ids"] == [tasks[1].external_id]
    assert report["empty_patch_ids"] == [tasks[2].external_id]
    assert report["incomplete_ids"] == [tasks[3].external_id]
    assert report["submitted_instances"] == 3 and report["total_instances"] == 4


def test_swe_agents_json_mapping_is_read_too(four_tasks, tmp_path):
    experiment, tasks = four_tasks
    mapping = {t.external_id: json.loads(published_line(t.external_id, t.gold_patch)) for t in tasks[:2]}
    path = tmp_path / "preds.json"
    path.write_text(json.dumps(mapping))
    import_into(experiment, str(path))
    assert sorted(Prediction.objects.values_list("instance_id", flat=True)) == sorted(t.external_id for t in tasks[:2])


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (
            lambda t: [published_line(t[0].external_id, "a"), published_line(t[0].external_id, "b")],
            "all_preds.jsonl:line 2: field instance_id: '{0}' already appears on line 1",
        ),
        (
            lambda t: [published_line(t[0].external_id, "a"), published_line(t[1].external_id, "b", system="other")],
            "all_preds.jsonl:line 2: field model_name_or_path: 'other' differs from '" + SYSTEM + "' on line 1",
        ),
        (
            lambda t: [json.dumps({"instance_id": t[0].external_id, "model_patch": "x"})],
            "all_preds.jsonl:line 1: field model_name_or_path: missing",
        ),
        (
            lambda t: [published_line(t[0].external_id, "a"), '{"instance_id": "x",'],
            "all_preds.jsonl:line 2: not valid JSON",
        ),
        (
            lambda t: [json.dumps({"instance_id": t[0].external_id, "model_name_or_path": SYSTEM, "model_patch": 7})],
            "all_preds.jsonl:line 1: field model_patch: must be a string or null, not int",
        ),
        (lambda t: [published_line(t[0].external_id, "diff\u0000")], "all_preds.jsonl:line 1: field model_patch"),
        (lambda t: ["[1, 2]"], "all_preds.jsonl:line 1: each prediction must be a JSON object"),
        (lambda t: [published_line("django__django-1", "x")], "none of its 1 predictions is for a task of dataset"),
    ],
)
def test_a_bad_file_is_refused_whole_naming_line_and_field(four_tasks, tmp_path, lines, problem):
    experiment, tasks = four_tasks
    path = tmp_path / "all_preds.jsonl"
    path.write_text("\n".join(lines(tasks)) + "\n")
    with pytest.raises(CommandError) as refused:
        import_into(experiment, str(path))
    assert problem.format(tasks[0].external_id) in str(refused.value)
    assert "nothing imported" in str(refused.value)
    assert not PredictionSet.objects.exists() and not Prediction.objects.exists()
    assert list(experiment.arms.values_list("label", flat=True)) == ["oracle"]


def test_a_live_arms_label_is_not_taken_over(four_tasks, tmp_path):
    experiment, tasks = four_tasks
    with pytest.raises(CommandError, match="already has an arm 'oracle' calling mock/mock-oracle"):
        import_into(experiment, predictions_file(tmp_path, tasks), label="oracle")
    assert not PredictionSet.objects.exists()
    assert experiment.arms.get(label="oracle").provider == "mock"


def test_importing_again_replaces_the_arms_predictions_and_keeps_what_a_run_replayed(four_tasks, tmp_path, start):
    experiment, tasks = four_tasks
    import_into(experiment, predictions_file(tmp_path, tasks))
    first = run_it(experiment, start)
    again = tmp_path / "again.jsonl"
    again.write_text(published_line(tasks[1].external_id, tasks[1].gold_patch, system="v2") + "\n")
    out = import_into(experiment, str(again))
    assert "Replaced the predictions of replay arm 'agent' (v2)" in out
    newest = PredictionSet.objects.latest("imported_at")
    assert experiment.arms.get(label="agent").config == {"predictions": newest.pk}
    assert PredictionSet.objects.count() == 2
    # The first run replayed the first file, and still says so.
    old_arm = first.arms.get(label="agent")
    assert old_arm.config["predictions"] != newest.pk and old_arm.model_name == SYSTEM
    second = run_it(experiment, start)
    resolved = second.attempts.filter(arm__label="agent", resolved=True).select_related("task")
    assert [a.task.external_id for a in resolved] == [tasks[1].external_id]


def test_an_arm_naming_another_organisations_predictions_is_refused(four_tasks, tmp_path, charlie):
    experiment, tasks = four_tasks
    import_into(experiment, predictions_file(tmp_path, tasks))
    theirs = PredictionSet.objects.get().pk
    other = Organization.objects.get(slug="other")  # charlie's
    load_demo_dataset(other)
    spec = {
        "name": "stolen",
        "dataset": experiment.dataset.name,
        "arms": [{"label": "theirs", "provider": "replay", "model_name": "x", "config": {"predictions": theirs}}],
    }
    with pytest.raises(Exception, match=f"no predictions with id {theirs} were imported into this organisation"):
        check_experiment_spec(other, spec)
    # In its own organisation the same spec is fine.
    check_experiment_spec(experiment.org, spec | {"name": "mine"})


def test_an_allowlist_does_not_govern_an_arm_that_sends_nothing(four_tasks, tmp_path, start):
    experiment, tasks = four_tasks
    import_into(experiment, predictions_file(tmp_path, tasks))
    AllowedProvider.objects.create(org=experiment.org, provider="mock", model_patterns="*")
    run = run_it(experiment, start)
    replayed = run.attempts.filter(arm__label="agent")
    assert not replayed.filter(error_category=ErrorCategory.NOT_ALLOWED).exists()
    assert replayed.filter(resolved=True).count() == 1


def test_an_outsider_cannot_import_into_an_experiment(four_tasks, tmp_path):
    experiment, tasks = four_tasks
    Organization.objects.create(name="Other", slug="other")
    with pytest.raises(CommandError, match="no experiment named 'Replayed' in other"):
        run_command("import_predictions", "--org", "other", "--experiment", experiment.name, "--arm", "a",
                    predictions_file(tmp_path, tasks))  # fmt: skip
    assert not ModelArm.objects.filter(provider="replay").exists() and not Attempt.objects.exists()


def test_the_experiment_page_says_what_a_replay_arm_replays(four_tasks, tmp_path, alice, charlie):
    experiment, tasks = four_tasks
    import_into(experiment, predictions_file(tmp_path, tasks))
    url = reverse("experiments:detail", args=[experiment.code])
    page = client_for(alice).get(url).content.decode()
    assert "replays all_preds.jsonl: 3 predictions, imported" in page
    assert client_for(charlie).get(url).status_code == 404
