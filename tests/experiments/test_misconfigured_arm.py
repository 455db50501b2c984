"""An arm whose first calls all fail the same configuration way stops being called: its other
attempts end ``arm_misconfigured`` without a call, the run page names the error and the
setting to change, the run's other arm goes on, and resuming the run after the arm's settings
changed calls the arm's remaining attempts (and none twice).

The OpenAI arm's provider is a local server that checks what it is sent as OpenAI does and
answers in its documented error format; the real SDK makes every call, through a real worker,
real Postgres and Redis."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from experiments.actions import ArmSpec, do_replace_arms, do_run_action
from experiments.jobs import execute_attempts
from experiments.misconfigured import STOP_AFTER
from experiments.models import AttemptStatus, RunStatus
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from providers.outcomes import OutcomeClass
from tests.conftest import client_for, work_queue
from tests.factories import ZERO_LATENCY_ARMS
from tests.providers.fake_server import FakeProvider, Reply, Seen

KEY = "sk-test-misconfigured-000000"
REFUSAL = "Unsupported parameter: 'temperature' is not supported with this model."
TASKS, REPETITIONS = 4, 3  # 12 attempts an arm: 5 calls, then 7 not made


def openai_refusal() -> Reply:
    """OpenAI's documented 400 for a parameter the model does not take."""
    error = {"message": REFUSAL, "type": "invalid_request_error", "param": "temperature"}
    error["code"] = "unsupported_parameter"
    return Reply(400, {"error": error})


def openai_answer() -> Reply:
    body = {
        "id": "chatcmpl-careful",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "o3-2025-04-16",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "no diff"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }
    return Reply(200, body)


def as_openai_checks(seen: Seen) -> Reply:
    """Refuses ``temperature``, as OpenAI does for its reasoning models; answers otherwise."""
    return openai_refusal() if "temperature" in (seen.body or {}) else openai_answer()


@pytest.fixture
def openai(org):
    server = FakeProvider()
    server.responder = as_openai_checks
    credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1")
    credential.set_api_key(KEY)
    credential.save()
    yield server
    server.close()


def careful(config: dict) -> ArmSpec:
    return ArmSpec("careful", "openai", "gpt-4o", {"max_retries": 0, **config})


@pytest.fixture
def one_thread(settings):
    # One call at a time: the arm's calls are not overlapped, so exactly STOP_AFTER are made
    # before the decision (with more threads, calls already in flight are made too).
    settings.PRBENCH_THREADS_PER_JOB = 1


@pytest.fixture
def stopped_run(experiment, openai, start, one_thread):
    do_replace_arms(experiment, [careful({"temperature": 0.2}), ZERO_LATENCY_ARMS[0]])
    experiment.repetitions = REPETITIONS
    experiment.sample_size = TASKS
    experiment.save()
    run = start(experiment, inference_only=True)
    work_queue()
    run.refresh_from_db()
    return run


def by_arm(run, label: str):
    return run.attempts.filter(arm__label=label)


def test_a_misconfigured_arm_makes_five_calls_and_the_rest_of_the_run_goes_on(openai, stopped_run):
    assert len(openai.seen) == STOP_AFTER
    refused = by_arm(stopped_run, "careful").filter(error_category=ErrorCategory.UNSUPPORTED_PARAMETER)
    assert refused.count() == STOP_AFTER
    not_called = by_arm(stopped_run, "careful").filter(error_category=ErrorCategory.ARM_MISCONFIGURED)
    assert not_called.count() == TASKS * REPETITIONS - STOP_AFTER
    for attempt in not_called:
        assert attempt.status == AttemptStatus.FAILED
        assert attempt.outcome == OutcomeClass.CONFIGURATION_FAILURE  # never scored
        assert attempt.cost_usd is None and attempt.request == {} and attempt.wall_ms is None
        assert "unsupported_parameter" in attempt.error_message and REFUSAL in attempt.error_message
    other = by_arm(stopped_run, "oracle")
    assert other.count() == other.filter(status=AttemptStatus.COMPLETED).count() == TASKS * REPETITIONS
    assert stopped_run.status == RunStatus.COMPLETED
    arm = stopped_run.arms.get(label="careful")
    assert arm.misconfigured_error == ErrorCategory.UNSUPPORTED_PARAMETER
    assert arm.misconfigured_message == f"HTTP 400: {REFUSAL}"


def test_the_run_page_names_the_error_and_the_setting_to_change(bob, stopped_run):
    response = client_for(bob).get(reverse("experiments:run", args=[stopped_run.code]))
    content = html.unescape(response.content.decode())
    assert f"careful stopped after {STOP_AFTER} configuration failures" in content
    assert f"unsupported_parameter</code> — HTTP 400: {REFUSAL}" in content
    assert "Change the arm's settings, then resume the run" in content
    assert KEY not in content


def test_resuming_after_the_settings_change_calls_the_arms_remaining_attempts(
    experiment, openai, stopped_run, django_capture_on_commit_callbacks
):
    do_replace_arms(experiment, [careful({}), ZERO_LATENCY_ARMS[0]])  # temperature removed
    paid_before = {a.pk: a.error_category for a in by_arm(stopped_run, "careful")}

    with django_capture_on_commit_callbacks(execute=True):
        assert do_run_action(stopped_run, "resume")
    work_queue()

    stopped_run.refresh_from_db()
    assert stopped_run.status == RunStatus.COMPLETED
    assert len(openai.seen) == TASKS * REPETITIONS  # the 5 refused, then the 7 left; none twice
    assert all("temperature" not in seen.body for seen in openai.seen[STOP_AFTER:])
    careful_attempts = by_arm(stopped_run, "careful")
    assert careful_attempts.filter(status=AttemptStatus.COMPLETED).count() == TASKS * REPETITIONS - STOP_AFTER
    assert not careful_attempts.filter(error_category=ErrorCategory.ARM_MISCONFIGURED).exists()
    refused_again = [pk for pk, category in paid_before.items() if category == ErrorCategory.UNSUPPORTED_PARAMETER]
    assert careful_attempts.filter(pk__in=refused_again, status=AttemptStatus.FAILED).count() == STOP_AFTER
    arm = stopped_run.arms.get(label="careful")
    assert arm.misconfigured_at is None and arm.config == {"max_retries": 0}


def test_an_attempt_back_in_the_queue_after_the_decision_is_not_called(
    openai, stopped_run, django_capture_on_commit_callbacks
):
    """One handed back to the queue after the arm was stopped (its worker gave it back, say)
    meets the mark in the claim's own UPDATE: it ends there, without a call."""
    attempt = by_arm(stopped_run, "careful").filter(error_category=ErrorCategory.ARM_MISCONFIGURED).first()
    type(attempt).objects.filter(pk=attempt.pk).update(
        status=AttemptStatus.QUEUED, error_category="", error_message="", outcome="", scored_at=None
    )
    type(stopped_run).objects.filter(pk=stopped_run.pk).update(status=RunStatus.RUNNING, finished_at=None)

    with django_capture_on_commit_callbacks(execute=True):
        execute_attempts(stopped_run.pk, [attempt.pk])

    attempt.refresh_from_db()
    assert len(openai.seen) == STOP_AFTER
    assert attempt.status == AttemptStatus.FAILED and attempt.error_category == ErrorCategory.ARM_MISCONFIGURED
    assert attempt.outcome == OutcomeClass.CONFIGURATION_FAILURE
    assert attempt.error_message == (
        f"not called: this arm's first {STOP_AFTER} calls all failed with unsupported_parameter: "
        f"HTTP 400: {REFUSAL}; change the arm's settings, then resume the run"
    )


def test_the_attempts_a_stopped_arm_ends_are_on_its_board_without_a_rebuild(experiment, openai, start, one_thread):
    """Ended in the record that stopped the arm, not recorded one by one: folded with it, so the
    run's boards count them before any rebuild (the run's end asks for one: disconnected here)."""
    from experiments import signals
    from leaderboards.hooks import refresh_changed
    from leaderboards.models import ArmSummary
    from leaderboards.summaries import stale_arms

    do_replace_arms(experiment, [careful({"temperature": 0.2}), ZERO_LATENCY_ARMS[0]])
    experiment.repetitions, experiment.sample_size = REPETITIONS, TASKS
    experiment.save()
    signals.run_changed.disconnect(dispatch_uid="leaderboards.refresh_changed")
    try:
        run = start(experiment, inference_only=True)
        work_queue()
    finally:
        signals.run_changed.connect(refresh_changed, dispatch_uid="leaderboards.refresh_changed")

    summary = ArmSummary.objects.get(run=run, arm__label="careful")
    assert summary.configuration_failures == TASKS * REPETITIONS
    assert stale_arms(run.pk) == []
