"""No answer can wedge a run: whatever a provider sends, every attempt ends recorded, and an
attempt that cannot be recorded is never paid for again and again."""

from dataclasses import replace
from decimal import Decimal

import pytest
from django.db import OperationalError
from django.urls import reverse

from experiments import pipeline
from experiments.actions import ArmSpec, do_replace_arms
from experiments.jobs import execute_attempts
from experiments.models import AttemptStatus, RunStatus
from prbench.recovery import run_recovery_sweep
from providers import gateway
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from providers.types import Completion, Usage
from tests.conftest import as_if_its_worker_died, client_for, work_queue
from tests.providers.fake_server import FakeProvider, Reply


def chat_completion(usage: dict) -> dict:
    return {
        "id": "chatcmpl-wedge",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "no diff", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


@pytest.fixture
def openai_server(org):
    server = FakeProvider()
    credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1")
    credential.set_api_key("sk-test-wedge-0000000")
    credential.save()
    yield server
    server.close()


def openai_arm(experiment, sample_size=4):
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0})])
    experiment.sample_size = sample_size
    experiment.save()


def test_negative_token_counts_are_recorded_as_unknown_with_a_warning(experiment, openai_server, start, alice):
    # The exact answer that wedged a run: schema-valid, with negative counts.
    openai_server.default = Reply(
        200, chat_completion({"prompt_tokens": -7, "completion_tokens": 12, "total_tokens": 5})
    )
    openai_arm(experiment)
    run = start(experiment, inference_only=True)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert len(openai_server.seen) == 4  # each attempt paid for once
    attempts = list(run.attempts.all())
    assert {a.status for a in attempts} == {AttemptStatus.COMPLETED}
    assert {(a.input_tokens, a.output_tokens, a.cost_usd, a.cost_source) for a in attempts} == {(0, 12, None, "")}
    assert "usage.input_tokens -7 is not a token count: stored as 0" in attempts[0].warnings
    page = client_for(alice).get(reverse("experiments:attempt", args=[attempts[0].code]))
    assert page.status_code == 200
    assert "usage.input_tokens -7 is not a token count: stored as 0" in page.content.decode()


@pytest.mark.parametrize(
    "figures, expected, warned",
    [
        (dict(usage=Usage(5, 10**9, 1)), dict(usage=Usage(5, 0, 1), cost_usd=None), "usage.output_tokens 1000000000"),
        (dict(usage=Usage(5, True, 0)), dict(usage=Usage(5, 0, 0), cost_usd=None), "usage.output_tokens True"),
        (dict(usage=Usage(5.5, 3, 0)), dict(usage=Usage(0, 3, 0), cost_usd=None), "usage.input_tokens 5.5"),  # type: ignore[arg-type]
        (dict(latency_ms=-1), dict(latency_ms=0, cost_usd=Decimal("0.0001")), "latency_ms -1"),
        (dict(cost_usd=Decimal("NaN")), dict(cost_usd=None), "cost_usd Decimal('NaN')"),
        (dict(cost_usd=Decimal("-0.5")), dict(cost_usd=None), "cost_usd Decimal('-0.5')"),
        (
            dict(first_token_ms=-5, output_tokens_per_s=2.0),
            dict(first_token_ms=None, output_tokens_per_s=None),
            "first_token_ms -5",
        ),
        (dict(first_token_ms=2.5), dict(first_token_ms=None), "first_token_ms 2.5"),
        (dict(output_tokens_per_s=float("inf")), dict(output_tokens_per_s=None), "output_tokens_per_s inf"),
        (dict(output_tokens_per_s=-1.0), dict(output_tokens_per_s=None), "output_tokens_per_s -1.0"),
        (dict(latency_ms=-1, output_tokens_per_s=3.0), dict(latency_ms=0, output_tokens_per_s=None), "latency_ms -1"),
    ],
)
def test_the_gateway_corrects_impossible_figures(figures, expected, warned):
    sane = Completion("x", "stop", Usage(5, 3, 0), 40, Decimal("0.0001"), "m", cost_source="catalog")
    corrected = gateway.sane_completion(replace(sane, **figures))
    assert {name: getattr(corrected, name) for name in expected} == expected
    assert corrected.cost_source == ("catalog" if corrected.cost_usd is not None else "")
    assert any(warning.startswith(warned) for warning in corrected.warnings)
    assert gateway.sane_completion(sane) is sane  # nothing to correct: untouched, no warning


@pytest.mark.parametrize(
    "poison, refusal",
    [
        # A count past the gateway's check (a future adapter bug): the column's CHECK refuses it.
        (lambda completion: replace(completion, usage=Usage(-1, 1, 0)), "IntegrityError"),
        # A raw response no JSON column can hold: the field refuses it before anything is sent.
        (lambda completion: replace(completion, raw_response={"bytes": b"\x00"}), "TypeError"),
    ],
)
def test_a_row_the_database_refuses_fails_only_that_attempt(experiment, start, monkeypatch, poison, refusal):
    from providers.adapters.mock.adapter import MockAdapter

    generate = MockAdapter.generate

    def poisoned_noisy_arm(self, request):
        completion = generate(self, request)
        return poison(completion) if self.arm.model_name == "mock-noisy" else completion

    monkeypatch.setattr(MockAdapter, "generate", poisoned_noisy_arm)
    monkeypatch.setattr(gateway, "sane_completion", lambda completion: completion, raising=False)
    run = start(experiment, inference_only=True)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    failed = run.attempts.filter(status=AttemptStatus.FAILED)
    assert set(failed.values_list("arm__label", "error_category")) == {("noisy", ErrorCategory.PLATFORM_ERROR)}
    assert failed.count() == 4
    assert failed.first().error_message.startswith(f"the database refused this attempt's result: {refusal}")
    assert run.attempts.filter(status=AttemptStatus.COMPLETED, arm__label="oracle").count() == 4


def test_an_attempt_claimed_three_times_fails_without_a_fourth_call(
    experiment, openai_server, start, monkeypatch, settings
):
    settings.PRBENCH_DATABASE_RETRY_SECONDS = 0  # gone for good: each job fails at once
    openai_server.default = Reply(
        200, chat_completion({"prompt_tokens": 7, "completion_tokens": 12, "total_tokens": 19})
    )
    openai_arm(experiment, sample_size=1)
    run = start(experiment, inference_only=True)
    attempt = run.attempts.get()
    record = pipeline.record_outcomes

    def database_gone(token, outcomes):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(pipeline, "record_outcomes", database_gone)
    for _ in range(3):  # each time the job fails before recording the answer
        with pytest.raises(OperationalError):
            execute_attempts(run.pk, [attempt.pk])
    assert len(openai_server.seen) == 1  # paid once: the later claims found it in the answer journal
    monkeypatch.setattr(pipeline, "record_outcomes", record)
    execute_attempts(run.pk, [attempt.pk])
    attempt.refresh_from_db()
    run.refresh_from_db()
    assert len(openai_server.seen) == 1  # not asked again
    assert (attempt.status, attempt.error_category, attempt.claims) == (
        AttemptStatus.FAILED,
        ErrorCategory.PLATFORM_ERROR,
        3,
    )
    assert attempt.error_message == "claimed 3 times without a result; not sent to the provider again"
    assert run.status == RunStatus.FAILED  # nothing left to run: the run ends instead of waiting for ever


def test_the_claim_limit_is_a_setting_and_recovery_sweeps_respect_it(experiment, start, settings):
    settings.PRBENCH_MAX_ATTEMPT_CLAIMS = 1
    run = start(experiment, inference_only=True)
    victim = run.attempts.order_by("sequence").first()
    assert pipeline.claim_attempt(victim.pk)  # its worker dies with it
    as_if_its_worker_died(victim.pk)
    run_recovery_sweep(stale_after_seconds=60)
    work_queue()
    victim.refresh_from_db()
    assert (victim.status, victim.error_category, victim.claims) == (
        AttemptStatus.FAILED,
        ErrorCategory.PLATFORM_ERROR,
        1,
    )
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == run.total_attempts - 1


def test_an_answer_outlives_a_short_database_outage_and_is_paid_once(experiment, openai_server, start, monkeypatch):
    """The provider answered; recording it fails twice (the database restarting), then works:
    the answer is recorded, not given back and asked for again."""
    openai_server.default = Reply(
        200, chat_completion({"prompt_tokens": 7, "completion_tokens": 12, "total_tokens": 19})
    )
    openai_arm(experiment, sample_size=1)
    run = start(experiment, inference_only=True)
    attempt = run.attempts.get()
    record, failures = pipeline.record_outcomes, []

    def restarting(token, outcomes):
        if len(failures) < 2:
            failures.append(1)
            raise OperationalError("the database system is starting up")
        return record(token, outcomes)

    monkeypatch.setattr(pipeline, "record_outcomes", restarting)
    execute_attempts(run.pk, [attempt.pk])
    attempt.refresh_from_db()
    assert (attempt.status, attempt.claims, len(failures)) == (AttemptStatus.COMPLETED, 1, 2)
    assert len(openai_server.seen) == 1


def test_a_job_that_cannot_give_its_attempts_back_retires_its_lease(
    experiment, openai_server, start, monkeypatch, settings
):
    """With the database gone for longer than the job waits, its claimed attempts cannot be
    given back; the process takes a new identity, so its old lease lapses and the sweep takes
    them back (a live lease would keep them running for ever)."""
    from experiments import liveness

    settings.PRBENCH_DATABASE_RETRY_SECONDS = 0
    openai_server.default = Reply(200, chat_completion({"prompt_tokens": 7, "completion_tokens": 1}))
    openai_arm(experiment, sample_size=1)
    run = start(experiment, inference_only=True)

    def database_gone(*args):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(pipeline, "record_outcomes", database_gone)
    monkeypatch.setattr(pipeline, "_give_back_claim", database_gone)
    before = liveness.heartbeat().name
    with pytest.raises(OperationalError):
        execute_attempts(run.pk, [run.attempts.get().pk])
    assert run.attempts.get().claimed_by == before  # stranded under the old identity
    assert liveness.heartbeat().name != before  # which this process no longer renews
