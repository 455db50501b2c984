"""One split of failure categories into the model's and the infrastructure's, used everywhere."""

import pytest
from django.utils import timezone

from experiments.models import Attempt, AttemptStatus, Run, RunArm, RunStatus
from providers.errors import ErrorCategory
from providers.outcomes import (
    INFRASTRUCTURE_FAILURES,
    MODEL_FAILURES,
    OutcomeClass,
    outcome_class,
    outcome_class_sql,
)


@pytest.mark.parametrize("category", list(ErrorCategory))
def test_every_category_is_in_exactly_one_class(category):
    assert (category in MODEL_FAILURES) != (category in INFRASTRUCTURE_FAILURES)


def test_only_what_the_model_did_is_a_model_failure():
    assert {"timeout", "content_filtered", "context_length_exceeded", "bad_request"} == MODEL_FAILURES
    assert {"rate_limited", "server_error", "platform_error", "capacity_timeout", "unknown"} <= INFRASTRUCTURE_FAILURES


def test_the_sql_expression_agrees_with_the_function(experiment, dataset):
    run = Run.objects.create(org=experiment.org, experiment=experiment, seed=1, status=RunStatus.RUNNING)
    arm = RunArm.objects.create(run=run, label="a", provider="mock", model_name="m", position=0)
    task = dataset.tasks.first()
    rows = [(AttemptStatus.COMPLETED, ""), (AttemptStatus.QUEUED, ""), (AttemptStatus.CANCELLED, "")]
    rows += [(AttemptStatus.FAILED, category) for category in ErrorCategory]
    for repetition, (status, category) in enumerate(rows):
        Attempt.objects.create(
            run=run,
            arm=arm,
            task=task,
            repetition=repetition,
            sequence=repetition,
            status=status,
            error_category=category,
            queued_at=timezone.now(),
        )
    classes = run.attempts.annotate(outcome=outcome_class_sql()).values_list("status", "error_category", "outcome")
    assert all(outcome == outcome_class(status, category) for status, category, outcome in classes)
    counted = {outcome for _, _, outcome in classes}
    assert counted == {None, OutcomeClass.SUCCESS, OutcomeClass.MODEL_FAILURE, OutcomeClass.INFRASTRUCTURE_FAILURE}
