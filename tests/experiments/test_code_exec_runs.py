"""A HumanEval sample through the real pipeline: mock arms, RQ worker, sandbox, boards."""

import json

import pytest
from django.urls import reverse

from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import Artifact, AttemptStatus, RunStatus
from leaderboards.report import run_report
from providers.outcomes import OutcomeClass
from tests.cli import run_command
from tests.conftest import client_for, work_queue
from tests.samples import HUMANEVAL_SAMPLE


@pytest.fixture
def code_experiment(org, humaneval, alice):
    arms = [
        ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"}),
        ArmSpec("wrong", "mock", "mock-wrong", {"mode": "wrong"}),
    ]
    spec = ExperimentSpec(name="Code", dataset=humaneval, arms=arms, repetitions=2, seed=3)
    return do_save_experiment(org, spec, alice)


def test_the_oracle_arm_passes_every_task_and_the_wrong_one_none(code_experiment, start, alice):
    run = start(code_experiment)
    assert run.evaluator_profile is None  # nothing for the evaluator agent to review
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    oracle, wrong = run.attempts.filter(arm__label="oracle"), run.attempts.filter(arm__label="wrong")
    assert oracle.count() == wrong.count() == HUMANEVAL_SAMPLE * 2
    assert set(oracle.values_list("status", "outcome", "resolved", "score")) == {
        (AttemptStatus.COMPLETED, OutcomeClass.SUCCESS, True, 1.0)
    }
    assert set(wrong.values_list("outcome", "resolved", "score")) == {(OutcomeClass.SUCCESS, False, 0.0)}
    answers = Artifact.objects.filter(attempt__run=run, kind="answer")
    assert answers.count() == HUMANEVAL_SAMPLE * 4
    outcomes = {(a.attempt.arm.label, json.loads(a.content)["outcome"]) for a in answers.select_related("attempt__arm")}
    assert outcomes == {("oracle", "passed"), ("wrong", "failed")}

    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200
    table = page.content.decode().split('id="pass-at-k"')[1].split("</table>")[0]
    assert "pass@1" in table and "pass@2" in table
    rows = table.split("<tr>")[2:]
    assert rows[0].startswith("<td>oracle</td>") and rows[0].count("100.0%") == 2
    assert rows[1].startswith("<td>wrong</td>") and rows[1].count("0.0%") == 2 and "100.0%" not in rows[1]
    assert f"{HUMANEVAL_SAMPLE} tasks" in rows[0]
    assert 'id="pass-at-k"' in run_report(run)  # the shared report has it too


def test_an_inference_only_code_run_has_no_pass_at_k(code_experiment, start, alice):
    run = start(code_experiment, inference_only=True)
    work_queue()
    assert set(run.attempts.values_list("resolved", "score")) == {(None, None)}
    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200 and 'id="pass-at-k"' not in page.content.decode()


def test_a_pr_run_has_no_pass_at_k(experiment, start, alice):
    run = start(experiment)
    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200 and 'id="pass-at-k"' not in page.content.decode()


def test_a_code_runs_pages_show_its_answers_not_patches(code_experiment, start, alice):
    run = start(code_experiment)
    work_queue()
    content = client_for(alice).get(reverse("experiments:run", args=[run.code])).content.decode()
    quality = content.split('id="board-quality"')[1].split("</div>")[0]
    assert "Passed" in quality and "FAIL_TO_PASS" not in quality and "Patch details" not in quality
    attempt = run.attempts.filter(arm__label="wrong").first()
    page = client_for(alice).get(reverse("experiments:attempt", args=[attempt.code])).content.decode()
    assert "<h2>How it was graded</h2>" in page and "<th>Tests</th><td>failed: the program exited non-zero" in page
    assert "No patch was found" not in page and "<dt>Patch</dt>" not in page


def test_swebench_formats_are_refused_for_a_run_that_answered_no_patches(code_experiment, start, alice):
    from django.core.management import CommandError

    run = start(code_experiment)
    work_queue()
    for format in ("swebench-preds", "swebench-report"):
        with pytest.raises(CommandError, match="answered code_exec tasks: SWE-bench's formats are for PR patch runs"):
            run_command("export_run", str(run.code), "--format", format, "--arm", "oracle")
    page = client_for(alice).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert "SWE-bench predictions" not in page
    url = reverse("experiments:run_export", args=[run.code, "swebench-preds"])
    refused = client_for(alice).get(url, follow=True)  # back to the run page, saying why
    assert "SWE-bench&#x27;s formats are for PR patch runs" in refused.content.decode()
