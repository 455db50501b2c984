"""One split of failure categories into the model's, the infrastructure's and the arm's
configuration's, used everywhere."""

import pytest

from experiments.actions import ArmSpec, do_replace_arms
from experiments.models import AttemptStatus
from providers.errors import ErrorCategory
from providers.outcomes import (
    CONFIGURATION_FAILURES,
    INFRASTRUCTURE_FAILURES,
    MODEL_FAILURES,
    OutcomeClass,
    outcome_class,
)
from tests.conftest import work_queue


@pytest.mark.parametrize("category", list(ErrorCategory))
def test_every_category_is_in_exactly_one_class(category):
    classes = (MODEL_FAILURES, INFRASTRUCTURE_FAILURES, CONFIGURATION_FAILURES)
    assert sum(category in each for each in classes) == 1


def test_only_what_the_model_did_is_a_model_failure():
    assert {"timeout", "content_filtered", "context_length_exceeded", "no_answer"} == MODEL_FAILURES
    assert {"rate_limited", "server_error", "platform_error", "capacity_timeout", "unknown"} <= INFRASTRUCTURE_FAILURES
    assert {"provider_timeout", "connection"} <= INFRASTRUCTURE_FAILURES


def test_what_the_arms_settings_caused_is_a_configuration_failure():
    expected = {"bad_request", "unsupported_parameter", "max_tokens_too_large", "model_not_found"}
    # And the attempts of an arm stopped after its first calls all failed one of those ways.
    expected |= {"arm_misconfigured"}
    assert expected == CONFIGURATION_FAILURES
    for category in expected:
        assert outcome_class(AttemptStatus.FAILED, category) == OutcomeClass.CONFIGURATION_FAILURE


def test_an_answer_whose_tests_ran_out_of_time_is_the_infrastructures_failure():
    assert outcome_class(AttemptStatus.COMPLETED) == OutcomeClass.SUCCESS
    assert outcome_class(AttemptStatus.COMPLETED, harness_failed=True) == OutcomeClass.INFRASTRUCTURE_FAILURE
    assert outcome_class(AttemptStatus.FAILED, ErrorCategory.TIMEOUT) == OutcomeClass.MODEL_FAILURE
    assert outcome_class(AttemptStatus.FAILED, ErrorCategory.SERVER_ERROR) == OutcomeClass.INFRASTRUCTURE_FAILURE
    assert outcome_class(AttemptStatus.CANCELLED) == outcome_class(AttemptStatus.QUEUED) == ""


def test_the_recorder_stores_each_attempts_class(experiment, start, settings):
    """Through the real pipeline, on one task whose tests hang past the validation limit: an
    answer the harness gave no verdict on, the model's own failure, the provider's outage."""
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 2
    experiment.sample_size = 1
    experiment.save()
    do_replace_arms(
        experiment,
        [
            ArmSpec("oracle", "mock", "m", {"mode": "oracle"}),
            ArmSpec("slow", "mock", "m", {"mode": "error", "failure_category": "timeout", "max_retries": 0}),
            ArmSpec("down", "mock", "m", {"mode": "error", "max_retries": 0}),
        ],
    )
    run = start(experiment)
    hanging = run.attempts.first().task
    hanging.test_command = ["{python}", "-c", "import time; time.sleep(30)"]
    hanging.save()
    work_queue()

    outcomes = dict(run.attempts.values_list("arm__label", "outcome"))
    assert outcomes == {
        "oracle": OutcomeClass.INFRASTRUCTURE_FAILURE,
        "slow": OutcomeClass.MODEL_FAILURE,
        "down": OutcomeClass.INFRASTRUCTURE_FAILURE,
    }
    assert run.attempts.get(arm__label="oracle").artifacts.get(kind="validation").status == "timed_out"
