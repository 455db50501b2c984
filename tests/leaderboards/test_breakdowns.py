"""By category and difficulty, consistency across repetitions, calibration: counted from a run
built row by row, so each figure is known, and checked against a reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse
from statsmodels.stats.inter_rater import fleiss_kappa as reference_kappa

from datasets.models import Dataset, TaskInstance
from evaluation.workloads.base import asks_for_confidence, stated_confidence
from experiments import pipeline
from experiments.models import Attempt, AttemptStatus, Run
from leaderboards.breakdowns import calibration, consistency, fleiss_kappa, group_table
from leaderboards.stats import wilson_interval
from providers.errors import ErrorCategory
from tests.conftest import client_for
from tests.factories import ArmPlan

PLANS = [ArmPlan("steady", quality=0.8, latency_ms=100), ArmPlan("erratic", quality=0.5, latency_ms=100)]


@pytest.fixture
def categorised_run(dataset, built_run):
    tasks = list(dataset.tasks.order_by("position"))
    for task in tasks:
        task.category = "even" if task.position % 2 == 0 else "odd"
        task.difficulty = "$200" if task.position < 6 else "$1000"
    TaskInstance.objects.bulk_update(tasks, ["category", "difficulty"])
    run, arms = built_run(PLANS, repetitions=3, seed=9)
    return run, arms


def test_each_category_is_counted_from_the_models_answers_only(categorised_run):
    run, arms = categorised_run
    # One infrastructure failure that resolved nothing must not count against "steady".
    failed = run.attempts.filter(arm=arms["steady"], task__category="odd").first()
    failed.status, failed.outcome, failed.error_category = "failed", "infrastructure_failure", "server_error"
    failed.resolved = None
    failed.save()
    table = group_table(run, "category")
    assert table.arms == ["steady", "erratic"] and [group for group, _ in table.groups] == ["even", "odd"]
    for group, scores in table.groups:
        for label, score in zip(table.arms, scores, strict=True):
            answers = Attempt.objects.filter(run=run, arm__label=label, task__category=group, outcome__in=SCORED)
            correct = answers.filter(resolved=True).count()
            assert (score.scored, score.correct) == (answers.count(), correct)
            assert score.interval == wilson_interval(correct, answers.count())
    steady_odd = dict(table.groups)["odd"][0]
    assert steady_odd.scored == 6 * 3 - 1
    assert [group for group, _ in group_table(run, "difficulty").groups] == ["$1000", "$200"]


SCORED = ("model_success", "model_failure")


def test_consistency_matches_fleiss_kappa_from_statsmodels(categorised_run):
    run, _ = categorised_run
    for found in consistency(run):
        per_task = {}
        for task_id, resolved in Attempt.objects.filter(run=run, arm__label=found.arm).values_list(
            "task_id", "resolved"
        ):
            per_task.setdefault(task_id, []).append(bool(resolved))
        table = np.array([[sum(r), len(r) - sum(r)] for r in per_task.values()])
        assert found.tasks == len(per_task) == 12
        assert found.agreeing == sum(1 for r in per_task.values() if len(set(r)) == 1)
        assert found.kappa == pytest.approx(reference_kappa(table))


def test_kappa_is_undefined_when_every_answer_is_alike_and_needs_two_tasks():
    assert fleiss_kappa([(3, 3), (3, 3)]) is None
    assert fleiss_kappa([(3, 1)]) is None
    assert fleiss_kappa([(2, 2), (2, 0), (2, 1)]) == pytest.approx(reference_kappa(np.array([[2, 0], [0, 2], [1, 1]])))


def test_a_run_of_one_repetition_has_no_consistency(dataset, built_run):
    run, _ = built_run(PLANS, repetitions=1)
    assert consistency(run) == []


def test_calibration_is_the_brier_score_and_the_expected_calibration_error(categorised_run):
    run, arms = categorised_run
    answered = list(run.attempts.filter(arm=arms["steady"], status=AttemptStatus.COMPLETED).order_by("sequence"))
    confidences = [0.95, 0.85, 0.55, 0.15, 1.0, 0.05] * 6
    for attempt, confidence in zip(answered, confidences, strict=False):
        attempt.confidence = confidence
    Attempt.objects.bulk_update(answered, ["confidence"])
    [found] = calibration(run)
    stated = [(a.confidence, 1.0 if a.resolved else 0.0) for a in answered if a.confidence is not None]
    conf, right = np.array([c for c, _ in stated]), np.array([r for _, r in stated])
    assert found.arm == "steady" and found.answers == len(stated)
    assert found.brier == pytest.approx(float(((conf - right) ** 2).mean()))
    bins = np.minimum((conf * 10).astype(int), 9)
    ece = sum((bins == b).sum() / len(conf) * abs(right[bins == b].mean() - conf[bins == b].mean()) for b in set(bins))
    assert found.ece == pytest.approx(ece)


@pytest.mark.parametrize(
    ("output", "confidence"),
    [
        ("Answer: C\nConfidence: 80%", 0.8),
        ("What is Paris? confidence: 0.35", 0.35),
        ("Confidence: 40\n...\nConfidence: 90", 0.9),  # the last one stated
        ("CONFIDENCE = 100", 1.0),
        ("Confidence: 250%", None),
        ("no confidence given", None),
    ],
)
def test_a_stated_confidence_is_read_from_the_answer(output, confidence):
    assert stated_confidence(output) == confidence


def test_confidence_is_recorded_only_when_the_prompt_asked_for_it():
    assert asks_for_confidence("Answer, then give your Confidence: 0-100%")
    assert not asks_for_confidence("Fix the bug. Be confident.")
    task = TaskInstance(dataset=Dataset(kind="pr_patch"), problem_statement="x")
    for template, recorded in (("{{problem_statement}} Confidence: N%", 0.7), ("{{problem_statement}}", "absent")):
        attempt = Attempt(run=Run(inference_only=True, config_snapshot={"prompt_template": template}), task=task)
        columns = pipeline.evaluate_answer(attempt, "```diff\n--- a/x\n+++ b/x\n```\nConfidence: 70%").columns
        assert columns.get("confidence", "absent") == recorded


def test_the_run_page_shows_the_breakdowns_to_members_only(categorised_run, alice, charlie):
    run, _ = categorised_run
    url = reverse("experiments:run", args=[run.code])
    page = client_for(alice).get(url).content.decode()
    assert 'id="by-category"' in page and 'id="by-difficulty"' in page and 'id="consistency"' in page
    assert 'id="calibration"' not in page  # no answer stated a confidence
    assert client_for(charlie).get(url).status_code == 404


def test_infrastructure_failures_are_not_in_any_breakdown(categorised_run):
    run, arms = categorised_run
    Attempt.objects.filter(run=run, arm=arms["erratic"]).update(
        status="failed", outcome="infrastructure_failure", error_category=ErrorCategory.SERVER_ERROR, resolved=None
    )
    assert all(scores[1] is None for _, scores in group_table(run, "category").groups)
    assert [c.arm for c in consistency(run)] == ["steady"]
