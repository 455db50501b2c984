"""A credential's requests and tokens per minute: the Redis buckets, and the gateway waiting on them.

Bucket tests pass the clock in, so nothing sleeps; gateway tests talk to a local fake provider.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
import time

import pytest
from django.db import connection

from providers import gateway, limits
from providers.errors import ErrorCategory, ProviderError
from providers.limits import RateLimit, charge_tokens, take_rate_budget
from providers.models import ProviderCredential
from providers.types import ArmSpec, CompletionRequest, Message
from tests.providers.fake_server import Reply

T0 = 1_000_000.0  # any clock will do: the buckets only see the time they are given


def answer(prompt_tokens: int = 3, completion_tokens: int = 1) -> Reply:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return Reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
            "usage": usage | {"total_tokens": prompt_tokens + completion_tokens},
        },
    )


# "\nhi" is 3 characters: 1 token for the prompt, plus 19 reserved for the answer.
REQUEST = CompletionRequest(messages=(Message("user", "hi"),), max_output_tokens=19)
ESTIMATE = 20


# --- the buckets -------------------------------------------------------------------------


def test_requests_run_out_then_refill():
    limit = RateLimit(credential_id=7, requests_per_minute=3)
    assert [take_rate_budget(limit, 0, T0) for _ in range(3)] == [0, 0, 0]
    assert take_rate_budget(limit, 0, T0) == pytest.approx(20)  # one request refills every 60/3 s
    assert take_rate_budget(limit, 0, T0 + 15) == pytest.approx(5)
    assert take_rate_budget(limit, 0, T0 + 20) == 0
    assert take_rate_budget(limit, 0, T0 + 20) == pytest.approx(20)
    assert [take_rate_budget(limit, 0, T0 + 600) for _ in range(4)] == [0, 0, 0, pytest.approx(20)]  # never over 3


def test_tokens_are_charged_by_estimate_and_topped_up_by_actuals():
    limit = RateLimit(credential_id=7, tokens_per_minute=600)  # 10 tokens a second
    assert take_rate_budget(limit, 400, T0) == 0
    assert take_rate_budget(limit, 300, T0) == pytest.approx(10)  # 200 left, 100 short
    charge_tokens(limit, 150, T0)  # the answer used 150 more than estimated
    assert take_rate_budget(limit, 300, T0) == pytest.approx(25)
    charge_tokens(limit, 1000, T0)  # far beyond the limit: the bucket owes 950
    assert take_rate_budget(limit, 300, T0) == pytest.approx(125)
    assert take_rate_budget(limit, 300, T0 + 125) == 0


def test_both_limits_are_taken_together_or_not_at_all():
    limit = RateLimit(credential_id=7, requests_per_minute=2, tokens_per_minute=600)
    assert take_rate_budget(limit, 500, T0) == 0
    assert take_rate_budget(limit, 200, T0) == pytest.approx(10)  # short of tokens...
    assert take_rate_budget(limit, 100, T0) == 0  # ...so its request was not spent either
    assert take_rate_budget(limit, 0, T0) == pytest.approx(30)  # now requests run short


def test_a_request_larger_than_the_whole_limit_could_never_be_taken():
    limit = RateLimit(credential_id=7, requests_per_minute=10, tokens_per_minute=100)
    assert take_rate_budget(limit, 101, T0) == -1
    assert take_rate_budget(limit, 100, T0) == 0  # and the refusal took nothing


def test_credentials_have_their_own_buckets():
    first, second = RateLimit(1, requests_per_minute=1), RateLimit(2, requests_per_minute=1)
    assert take_rate_budget(first, 0, T0) == 0
    assert take_rate_budget(second, 0, T0) == 0
    assert take_rate_budget(first, 0, T0) > 0


def test_a_clock_behind_the_last_caller_does_not_refill_twice():
    limit = RateLimit(credential_id=7, requests_per_minute=60)
    assert all(take_rate_budget(limit, 0, T0) == 0 for _ in range(60))
    assert take_rate_budget(limit, 0, T0 - 5) == pytest.approx(1)  # nothing refilled yet
    assert take_rate_budget(limit, 0, T0 + 1) == 0
    assert take_rate_budget(limit, 0, T0 + 1) == pytest.approx(1)


def test_processes_sharing_a_credential_never_exceed_its_limit():
    # Forked workers each race for the same five requests at the same instant; the count of
    # successes lives in Redis because that is what the processes share.
    limits.get_connection().set("test:taken", 0)
    fork = multiprocessing.get_context("fork")
    start = fork.Barrier(4)
    workers = [fork.Process(target=_race_for_budget, args=(start,)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    assert int(limits.get_connection().get("test:taken")) == 5


def _race_for_budget(start) -> None:
    limit = RateLimit(credential_id=7, requests_per_minute=5, tokens_per_minute=10_000)
    start.wait()
    threads = [threading.Thread(target=_take_and_count, args=(limit,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _take_and_count(limit: RateLimit) -> None:
    for _ in range(4):
        if take_rate_budget(limit, 100, T0) == 0:
            limits.get_connection().incr("test:taken")


def test_a_wait_cut_short_by_a_job_timeout_is_no_longer_counted():
    # RQ ends an overrunning job with SIGALRM, raising inside whatever sleep it is in.
    limit = RateLimit(credential_id=7, requests_per_minute=1)
    assert take_rate_budget(limit, 0, time.time()) == 0

    def job_timeout(signum, frame):
        assert limits.waiting_for(["test-arm"]) == limits.Waiting(for_rate_limit=1)
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, job_timeout)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        with pytest.raises(TimeoutError):
            limits.wait_for_rate_budget(limit, 0, "test-arm", time.monotonic() + 120)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert limits.waiting_for(["test-arm"]) == limits.Waiting()


# --- the gateway -------------------------------------------------------------------------


def credential_for(org, fake, **rate) -> ProviderCredential:
    credential = ProviderCredential(org=org, provider="openai", base_url=fake.url + "/v1", **rate)
    credential.set_api_key("sk-test-rate-limits-0000")
    credential.save()
    return credential


def arm(**config) -> ArmSpec:
    return ArmSpec("openai", "gpt-4o-mini", {"max_retries": 0, "retry_base_ms": 1} | config, key="test-arm")


@pytest.mark.django_db(transaction=True)  # the waiting call runs in a thread with its own connection
def test_the_gateway_waits_for_budget_instead_of_sending(org, fake):
    credential = credential_for(org, fake, requests_per_minute=1)
    fake.default = answer()
    gateway.complete(org.pk, arm(), REQUEST)  # the minute's one request
    results: list = []

    def second_call():
        try:
            results.append(gateway.complete(org.pk, arm(max_concurrency=1), REQUEST))
        finally:
            connection.close()

    caller = threading.Thread(target=second_call)
    caller.start()
    wait_until(lambda: limits.waiting_for(["test-arm"]).for_rate_limit == 1)
    assert len(fake.seen) == 1  # held back, not sent to collect a 429
    assert limits.get_connection().zcard(limits.slots_key("test-arm")) == 0  # and holding no slot
    limits.get_connection().delete(limits.rate_key(credential.pk))  # as if the minute had passed
    caller.join(5)
    assert [c.text for c in results] == ["OK"] and len(fake.seen) == 2
    assert limits.waiting_for(["test-arm"]) == limits.Waiting()


@pytest.mark.django_db
def test_a_short_wait_ends_when_the_bucket_has_refilled(org, fake):
    credential = credential_for(org, fake, tokens_per_minute=6000)  # 100 tokens a second
    limit = RateLimit(credential.pk, tokens_per_minute=6000)
    fake.default = answer()
    started = time.monotonic()  # before emptying: a slow machine must not eat the wait
    assert take_rate_budget(limit, 6000, time.time()) == 0  # empty: the request needs 0.2 s
    completion = gateway.complete(org.pk, arm(), REQUEST)
    assert time.monotonic() - started >= 0.15
    assert completion.text == "OK" and len(fake.seen) == 1


@pytest.mark.django_db
def test_tokens_used_beyond_the_estimate_are_charged(org, fake):
    credential = credential_for(org, fake, tokens_per_minute=60)  # one token a second refills
    fake.script(answer(prompt_tokens=3, completion_tokens=1), answer(prompt_tokens=1000, completion_tokens=500))
    gateway.complete(org.pk, arm(), REQUEST)  # used less than estimated: the estimate stands
    assert tokens_left(credential) == 60 - ESTIMATE
    gateway.complete(org.pk, arm(), REQUEST)  # used 1500: the bucket now owes the excess
    assert -1460 <= tokens_left(credential) < -1458  # 60 - 2 x 20 estimated - 1480 more, + refill


@pytest.mark.django_db
def test_a_wait_longer_than_the_capacity_wait_ends_at_once_as_capacity_timeout(org, fake, settings):
    settings.PRBENCH_CAPACITY_WAIT_SECONDS = 5
    credential = credential_for(org, fake, requests_per_minute=1)
    take_rate_budget(RateLimit(credential.pk, requests_per_minute=1), 0, time.time())
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        gateway.complete(org.pk, arm(max_retries=2, retry_deadline_s=30), REQUEST)
    assert caught.value.category == ErrorCategory.CAPACITY_TIMEOUT
    assert "rate limit" in caught.value.message and "no call was made" in caught.value.message
    # The platform's refusal: not retried, and refused at once rather than slept on (the budget
    # refills in 60 s, so any wait for it would take far longer than this bound).
    assert caught.value.retries == 0 and time.monotonic() - started < 5
    assert fake.seen == []
    assert limits.waiting_for(["test-arm"]) == limits.Waiting()


@pytest.mark.django_db
def test_a_request_larger_than_the_tokens_per_minute_is_refused(org, fake):
    credential_for(org, fake, tokens_per_minute=100)
    with pytest.raises(ProviderError) as caught:
        gateway.complete(org.pk, arm(max_retries=3), CompletionRequest(messages=REQUEST.messages))
    assert caught.value.category == ErrorCategory.BAD_REQUEST and not caught.value.retryable
    assert "tokens_per_minute limit of 100" in caught.value.message
    assert caught.value.retries == 0 and fake.seen == []


@pytest.mark.django_db
def test_a_credential_without_limits_keeps_no_bucket(org, fake):
    credential = credential_for(org, fake)
    fake.default = answer()
    gateway.complete(org.pk, arm(), REQUEST)
    assert not limits.get_connection().exists(limits.rate_key(credential.pk))


def tokens_left(credential: ProviderCredential) -> float:
    level = limits.get_connection().hget(limits.rate_key(credential.pk), "tokens")
    assert level is not None
    return float(level)


def wait_until(condition, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.django_db(transaction=True)  # the calls run on threads with connections of their own
def test_waiting_for_the_arms_slot_is_not_the_providers_timeout(org, fake):
    """Four calls, one slot, a provider answering in 0.4 s, a 1 s total timeout: the last call
    waits about 1.2 s for the slot, which must not count against its own second."""
    credential_for(org, fake)
    fake.default = Reply(200, answer().body, delay_s=0.4)
    prepared = gateway.prepare(org.pk, arm(max_concurrency=1, timeout_total_s=1))
    results: list = []

    def one_call() -> None:
        try:
            results.append(gateway.call(prepared, REQUEST))
        except ProviderError as exc:
            results.append(exc)
        finally:
            connection.close()

    calls = [threading.Thread(target=one_call) for _ in range(4)]
    for call in calls:
        call.start()
    for call in calls:
        call.join(30)
    assert [type(r).__name__ for r in results] == ["Completion"] * 4
    waited = max(results, key=lambda completion: completion.wall_ms)
    assert waited.wall_ms > 1000 and waited.latency_ms < 1000  # its wall time includes the wait


@pytest.mark.django_db
def test_no_free_slot_within_the_capacity_wait_ends_as_capacity_timeout(org, fake, settings):
    settings.PRBENCH_CAPACITY_WAIT_SECONDS = 1
    credential_for(org, fake)
    held = limits.acquire_slots("test-arm", 1, 1)  # another call holds the arm's one slot
    with pytest.raises(ProviderError) as caught:
        gateway.complete(org.pk, arm(max_concurrency=1, max_retries=2), REQUEST)
    limits.release_slots("test-arm", held)
    assert caught.value.category == ErrorCategory.CAPACITY_TIMEOUT and not caught.value.retryable
    assert "max_concurrency" in caught.value.message
    assert caught.value.retries == 0 and fake.seen == []
