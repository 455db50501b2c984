"""An answer the provider returned is recorded even when Redis fails as it arrives: neither
the journal, the arm's slots and rate budget, nor queuing its judging can hand it back to be
paid for again. Judging that could not be queued is queued by the sweep once Redis is back.

Redis here is a real redis-server of the test's own, really shut down (LimitsRedis); the
transactions really commit, so the judging enqueue runs where it runs in a worker."""

import contextlib
import threading
from datetime import timedelta

import pytest
from django.db.models import F
from django_rq.settings import QUEUES as rq_queues
from redis import RedisError

from evaluation.models import EvaluatorProfile
from experiments import pipeline
from experiments.actions import ArmSpec, do_replace_arms
from experiments.jobs import execute_attempts, warm_attempt_pool
from experiments.judging import QUEUED_WITHIN
from experiments.models import Attempt, AttemptStatus, Run
from experiments.pipeline import BatchRunner, claim_attempts, execute
from experiments.recovery import requeue_unjudged
from prbench import metrics, queues
from providers import gateway
from providers.models import ProviderCredential
from tests.experiments.test_infrastructure_errors import LimitsRedis, answer
from tests.providers.fake_server import FakeProvider

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def own_redis(monkeypatch, tmp_path):
    """Every Redis the worker uses, the queue's too, on one server the test stops."""
    redis = LimitsRedis(tmp_path)
    monkeypatch.setattr(queues, "_connection", redis.client)
    port = redis.client.connection_pool.connection_kwargs["port"]
    for name, queue in list(rq_queues.items()):  # judging and recovery too: each has its own entry
        monkeypatch.setitem(rq_queues, name, {**queue, "URL": f"redis://127.0.0.1:{port}/0"})
    warm_attempt_pool()
    yield redis
    redis.close()


@pytest.fixture
def judged_run(experiment, start, org):
    def make(provider: str, model: str, config: dict, size: int) -> Run:
        do_replace_arms(experiment, [ArmSpec("arm", provider, model, config)])
        experiment.sample_size = size
        experiment.save()
        run = start(experiment, inference_only=True)
        profile = EvaluatorProfile.objects.create(
            name="judge", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
        )
        Run.objects.filter(pk=run.pk).update(evaluator_profile=profile)
        return Run.objects.get(pk=run.pk)

    return make


def judging_jobs(profile_id: int) -> list[list[int]]:
    """The attempts of every judging job of the profile waiting on the queue."""
    queue = queues.get_queue(queues.JUDGING_QUEUE)
    waiting = [queue.fetch_job(job_id) for job_id in queue.get_job_ids()]
    return [job.args[1] for job in waiting if job and job.args and (job.func_name or "").endswith("judge_attempts")]


def test_answers_arriving_as_redis_stops_are_all_recorded_and_judged_once_it_is_back(
    judged_run, org, own_redis, monkeypatch, settings
):
    server = FakeProvider()
    credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1", requests_per_minute=600)
    credential.set_api_key("sk-test-answers-000000")
    credential.save()
    settings.PRBENCH_THREADS_PER_JOB = 2  # two claims, so two tokens, are running when Redis stops
    run = judged_run("openai", "gpt-4o", {"max_retries": 0}, size=4)
    held = threading.Barrier(2, timeout=30)
    stopped = threading.Event()

    def answer_after_redis_stops(seen):
        if len(server.seen) == 1:
            return answer()  # the first answer frees a thread, so the job claims a second time
        if held.wait() == 0:  # the second and third answers arrive as Redis stops
            own_redis.shut_down()
            stopped.set()
        stopped.wait(30)
        return answer()

    server.responder = answer_after_redis_stops
    try:
        with contextlib.suppress(RedisError):  # the job cannot claim its fourth attempt
            execute_attempts(run.pk, list(run.attempts.values_list("pk", flat=True)))
    finally:
        server.close()

    answered = run.attempts.filter(status=AttemptStatus.COMPLETED).order_by("sequence")
    assert [a.claims for a in answered] == [1] * 3
    assert len(server.seen) == 3  # one call per answered attempt: none handed back to be paid again
    # Nothing paid for the fourth: the job could not claim it (no slot with Redis down), or,
    # when it claimed it with the third (a fast arm's attempts are handed out together), it
    # was given back before its call.
    fourth = run.attempts.exclude(pk__in=answered.values("pk")).get()
    assert (fourth.status, fourth.claim_token) == (AttemptStatus.QUEUED, None) and fourth.claims <= 1

    monkeypatch.undo()  # Redis is back (the test's own Redis, empty: every job queued before is gone)
    # The sweep leaves answers just recorded to the job their worker is queuing.
    answered.update(scored_at=F("scored_at") - (QUEUED_WITHIN + timedelta(seconds=1)))
    assert requeue_unjudged(timedelta(0)) == {"unjudged": 3}
    assert sorted(pk for ids in judging_jobs(run.evaluator_profile_id) for pk in ids) == sorted(a.pk for a in answered)


def test_a_judging_enqueue_that_fails_does_not_keep_the_next_tokens_answers_from_being_recorded(judged_run, own_redis):
    run = judged_run("mock", "mock-oracle", {"mode": "oracle"}, size=2)
    first, second = run.attempts.order_by("sequence")
    runner = BatchRunner(run.pk, [first.pk, second.pk], threads=2)
    for attempt in (first, second):
        token, claimed = claim_attempts([attempt.pk], runner.related)
        runner.claimed[token] = [attempt.pk]
        prepared = gateway.prepare(run.org_id, pipeline.run_arm_spec(claimed[0].arm))
        runner._finished(token, execute(claimed[0], prepared))
    own_redis.shut_down()  # both answers are in; now neither journal nor queue can be written

    runner._flush()

    assert list(run.attempts.order_by("sequence").values_list("status", flat=True)) == [AttemptStatus.COMPLETED] * 2
    assert runner.recorded == 2 and not runner.finished
    assert Attempt.objects.filter(run=run, claim_token__isnull=True).count() == 0  # none handed back


def test_an_agent_turn_paid_for_while_redis_is_down_is_recorded_not_asked_again(
    experiment, start, own_redis, monkeypatch
):
    config = {"mode": "oracle", "solver": "agent", "max_turns": 12}
    do_replace_arms(experiment, [ArmSpec("agent", "mock", "m", config)])
    experiment.sample_size = 1
    experiment.save()
    run = start(experiment)
    attempt = run.attempts.get()
    turns_before = metrics.AGENT_TURNS.labels("mock")._value.get()
    call_the_provider = gateway.call

    def redis_stops_as_the_first_turn_is_answered(prepared, request):
        # After the call was counted and paid, before its answer is journalled. Stopped here,
        # not by a thread racing the call's latency: under load that thread lost the race and
        # Redis stopped only after the first turn was journalled (a flaky CI run).
        completion = call_the_provider(prepared, request)
        if own_redis.server.poll() is None:
            own_redis.shut_down()
        return completion

    monkeypatch.setattr(gateway, "call", redis_stops_as_the_first_turn_is_answered)
    execute_attempts(run.pk, [attempt.pk])

    attempt.refresh_from_db()
    # Handing it back would ask the model for the unjournalled turn again: it ends here,
    # the platform's failure (never the model's), with the paid turn and its cost recorded.
    assert (attempt.status, attempt.error_category, attempt.claims) == (AttemptStatus.FAILED, "platform_error", 1)
    assert "Redis failed mid-trajectory" in attempt.error_message
    assert attempt.turns == 1 and attempt.output_tokens
    assert metrics.AGENT_TURNS.labels("mock")._value.get() - turns_before == 1
