"""A Redis failure is never scored against the model: before the provider call it gives the
attempt back to the queue; after the provider answered it cannot lose the paid answer.

The arms' limits (slots, rate budget) live in a redis-server of the test's own, which is
really shut down; the queue stays on the test Redis."""

import contextlib
import socket
import subprocess
import threading
import time

import pytest
from redis import Redis, RedisError
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from experiments.actions import ArmSpec, do_replace_arms
from experiments.jobs import execute_attempts, warm_attempt_pool
from experiments.models import AttemptStatus
from prbench import queues
from prbench.queues import get_queue
from providers import gateway
from providers.limits import RateLimit, rate_waiting_key, take_rate_budget
from providers.models import ProviderCredential
from tests.conftest import work_queue
from tests.providers.fake_server import FakeProvider, Reply


class LimitsRedis:
    """A real redis-server for the arms' limits, which a test can shut down."""

    def __init__(self, directory) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(directory)],
            stdout=subprocess.DEVNULL,
        )
        # No retries: a client that reconnects quietly would hide the fault under test.
        self.client = Redis(port=port, socket_connect_timeout=1, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        deadline = time.monotonic() + 10
        while not self._answers():
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def _answers(self) -> bool:
        with contextlib.suppress(RedisError):
            return bool(self.client.ping())
        return False

    def shut_down(self) -> None:
        with contextlib.suppress(RedisError):
            self.client.shutdown(nosave=True)
        self.server.wait(timeout=10)

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.kill()
            self.server.wait(timeout=10)


@pytest.fixture
def limits_redis(monkeypatch, tmp_path):
    redis = LimitsRedis(tmp_path)
    monkeypatch.setattr(queues, "_connection", redis.client)
    warm_attempt_pool()  # the attempt threads exist before the fault, as in a running worker
    yield redis
    redis.close()


@pytest.fixture
def provider(org):
    server = FakeProvider()
    # A rate-limited credential: its calls take rate budget, then a slot, on the attempt's own
    # thread, so the fault meets the attempt there and not in the job's claim.
    credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1", requests_per_minute=600)
    credential.set_api_key("sk-test-infra-0000000")
    credential.save()
    yield server
    server.close()


def answer(completion_tokens: int = 2) -> Reply:
    body = {
        "id": "chatcmpl-infra",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "no diff"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": completion_tokens, "total_tokens": 7 + completion_tokens},
    }
    return Reply(200, body)


@pytest.fixture
def one_attempt(experiment, start):
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0})])
    experiment.sample_size = 1
    experiment.save()
    run = start(experiment, inference_only=True)
    return run, run.attempts.get()


def test_redis_down_before_the_call_puts_the_attempt_back_in_the_queue(
    one_attempt, provider, limits_redis, monkeypatch, django_capture_on_commit_callbacks
):
    run, attempt = one_attempt
    provider.default = answer()
    # The credential's one request a minute is spent: the attempt waits for rate budget on
    # its thread, after the job prepared its arm; Redis goes down while it waits.
    credential = ProviderCredential.objects.get(provider="openai")
    credential.requests_per_minute = 1
    credential.save()
    assert take_rate_budget(RateLimit(credential.pk, 1, None), 0, time.time()) == 0
    waiting = rate_waiting_key(f"run-arm:{attempt.arm_id}")

    def shut_down_once_the_attempt_waits() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not limits_redis.client.exists(waiting):
            time.sleep(0.05)
        limits_redis.shut_down()

    fault = threading.Thread(target=shut_down_once_the_attempt_waits)
    fault.start()
    jobs_before = set(get_queue().get_job_ids())

    with django_capture_on_commit_callbacks(execute=True):
        execute_attempts(run.pk, [attempt.pk])
    attempt.refresh_from_db()
    assert (attempt.status, attempt.error_category, attempt.claims) == (AttemptStatus.QUEUED, "", 1)
    assert (attempt.claim_token, attempt.claimed_by) == (None, "")
    assert provider.seen == []  # nothing was sent, so nothing was paid
    new_jobs = [get_queue().fetch_job(job_id) for job_id in set(get_queue().get_job_ids()) - jobs_before]
    assert [job.args for job in new_jobs] == [(run.pk, [attempt.pk])]

    monkeypatch.undo()  # Redis is back
    work_queue()
    attempt.refresh_from_db()
    assert (attempt.status, attempt.claims) == (AttemptStatus.COMPLETED, 2)
    assert len(provider.seen) == 1


def test_redis_down_after_the_answer_keeps_the_answer(one_attempt, provider, limits_redis):
    run, attempt = one_attempt

    def answer_as_redis_goes_down(seen):
        limits_redis.shut_down()  # after the slot was taken, before it is given back
        # More tokens than estimated, so the excess is charged to the rate limit: in Redis too.
        return answer(completion_tokens=100_000)

    provider.responder = answer_as_redis_goes_down
    execute_attempts(run.pk, [attempt.pk])
    attempt.refresh_from_db()
    run.refresh_from_db()
    assert (attempt.status, attempt.error_category, attempt.claims) == (AttemptStatus.COMPLETED, "", 1)
    assert attempt.output_tokens == 100_000 and len(provider.seen) == 1
    assert run.status == "completed"


def test_an_attempt_given_back_before_its_call_is_not_billed_for_that_call_on_its_next_claim(
    one_attempt, provider, monkeypatch, django_capture_on_commit_callbacks
):
    # Its job counted the call when it claimed the attempt (answer_journal.mark_sent_many);
    # Redis then drops the attempt's connection as it takes rate budget, so no call goes out.
    run, attempt = one_attempt
    provider.default = answer()
    take_budget = gateway.wait_for_rate_budget
    dropped = []

    def dropped_once(*args, **kwargs):
        if not dropped:
            dropped.append(True)
            raise RedisConnectionError("Connection reset by peer")
        return take_budget(*args, **kwargs)

    monkeypatch.setattr(gateway, "wait_for_rate_budget", dropped_once)
    with django_capture_on_commit_callbacks(execute=True):
        execute_attempts(run.pk, [attempt.pk])
    attempt.refresh_from_db()
    assert (attempt.status, attempt.claims, provider.seen) == (AttemptStatus.QUEUED, 1, [])

    work_queue()
    attempt.refresh_from_db()
    assert (attempt.status, attempt.claims, len(provider.seen)) == (AttemptStatus.COMPLETED, 2, 1)
    assert attempt.repeat_calls == 0  # one call was made: the given-back claim's count was taken back
