"""Evaluator agreement against values worked out by hand."""

import pytest
from django.core.management import CommandError
from django.utils import timezone

from evaluation.agreement import agreement
from evaluation.models import EvaluatorProfile, Verdict
from experiments.models import Attempt, Run, RunArm, RunStatus
from tests.cli import assert_clean_refusal, run_command, run_manage

# Five attempts, two profiles.
OVERALL_A = [10, 20, 30, 40, 50]
OVERALL_B = [15, 25, 20, 45, 60]  # ranks 1 3 2 4 5: d² = 2, rho = 1 - 6·2 / (5·24) = 0.9
RISK_A = ["low", "low", "medium", "high", "high"]
RISK_B = ["low", "medium", "medium", "high", "low"]
# Observed agreement 3/5; expected (2·2 + 1·2 + 2·1) / 25 = 0.32; kappa = 0.28 / 0.68.
CONFIDENCE_A = [0.1, 0.4, 0.35, 0.8, 0.9]
RESOLVED = [False, False, True, True, True]  # 5 of the 6 (resolved, not) pairs ordered: AUC 5/6


@pytest.fixture
def judged(experiment, dataset):
    run = Run.objects.create(org=experiment.org, experiment=experiment, seed=1, status=RunStatus.COMPLETED)
    arm = RunArm.objects.create(run=run, label="a", provider="mock", model_name="m")
    task = dataset.tasks.first()
    first = EvaluatorProfile.objects.create(name="first", provider="mock", model_name="m")
    second = EvaluatorProfile.objects.create(name="second", provider="mock", model_name="m")
    now = timezone.now()
    for rep in range(5):
        attempt = Attempt.objects.create(
            run=run, task=task, arm=arm, repetition=rep, sequence=rep, status="completed",
            resolved=RESOLVED[rep], queued_at=now, validated_at=now,
        )  # fmt: skip
        Verdict.objects.create(
            attempt=attempt, profile=first, status="judged", overall=OVERALL_A[rep], change_risk=RISK_A[rep],
            correctness_confidence=CONFIDENCE_A[rep],
        )  # fmt: skip
        Verdict.objects.create(
            attempt=attempt, profile=second, status="judged", overall=OVERALL_B[rep], change_risk=RISK_B[rep],
            correctness_confidence=0.5,
        )  # fmt: skip
    return run, first, second


def test_agreement_matches_the_hand_computed_values(judged):
    _run, first, second = judged
    result = agreement(first, second)
    assert result.attempts == 5
    assert result.spearman == pytest.approx(0.9)
    assert result.kappa == pytest.approx(0.28 / 0.68)
    assert result.auc["first:v1 (mock)"] == pytest.approx(5 / 6)
    assert result.auc["second:v1 (mock)"] == pytest.approx(0.5)  # one confidence for all: chance


def test_the_command_prints_them(judged):
    run, _first, _second = judged
    output = run_command("evaluator_agreement", "--profile", "first", "--profile", "second:1", "--run", str(run.code))
    assert "5 attempt(s) judged by both" in output
    assert "Spearman correlation of overall scores: 0.900" in output
    assert "Cohen's kappa of change risk: 0.412" in output
    assert "AUC of correctness confidence for resolved, first:v1 (mock): 0.833" in output


@pytest.mark.parametrize("run", ["zzz", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_run_is_named(judged, run):
    with pytest.raises(CommandError) as excinfo:
        run_command("evaluator_agreement", "--profile", "first", "--profile", "second", "--run", run)
    assert str(excinfo.value) == f"no run with id {run!r}"


def test_an_unknown_run_is_a_clean_error_on_the_command_line(transactional_db):
    for name in ("first", "second"):
        EvaluatorProfile.objects.create(name=name, provider="mock", model_name="m")

    result = run_manage("evaluator_agreement", "--profile", "first", "--profile", "second", "--run", "zzz")

    assert_clean_refusal(result, "no run with id 'zzz'")


def test_too_little_overlap_says_not_available(judged):
    _run, first, second = judged
    Verdict.objects.filter(profile=second).exclude(attempt__repetition__in=[0, 1]).delete()
    result = agreement(first, second)
    assert (result.attempts, result.spearman) == (2, None)


def test_staff_see_the_agreement_in_the_admin(judged, admin_client):
    from django.urls import reverse

    _run, first, _second = judged
    page = admin_client.get(reverse("admin:evaluation_evaluatorprofile_change", args=[first.pk])).content.decode()
    assert "Agreement with other profiles" in page
    assert "Spearman correlation of overall scores: 0.900" in page
    assert "second:v1 (mock)" in page
