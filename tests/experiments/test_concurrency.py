"""Threads inside a job overlap provider calls; the arm's limit holds across all of them."""

import threading
import time

import pytest
from django.conf import settings

from experiments import in_flight
from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import AttemptStatus, RunStatus
from experiments.pipeline import BatchRunner
from providers import limits
from providers.errors import ProviderError
from tests.conftest import work_queue


@pytest.mark.django_db(transaction=True)
def test_a_job_overlaps_calls_up_to_the_arms_limit(experiment, monkeypatch):
    monkeypatch.setattr(settings, "PRBENCH_THREADS_PER_JOB", 8)
    monkeypatch.setattr(settings, "PRBENCH_ATTEMPTS_PER_JOB", 8)
    do_replace_arms(
        experiment, [ArmSpec("slow", "mock", "m", {"mode": "oracle", "latency_ms": 300, "max_concurrency": 3})]
    )
    experiment.sample_size, experiment.repetitions = 4, 2  # 8 attempts in one job
    experiment.save()
    run = do_start_run(experiment, inference_only=True)
    key = limits.slots_key(f"run-arm:{run.arms.get().pk}")
    peak, stop = [0], threading.Event()

    def watch():
        redis = limits.get_connection()
        while not stop.is_set():
            peak[0] = max(peak[0], redis.zcard(key))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    work_queue()
    elapsed = time.monotonic() - started
    stop.set()
    watcher.join()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(status=AttemptStatus.COMPLETED, claims=1).count() == 8
    assert peak[0] == 3  # never more than the arm allows, and the limit was reached
    assert 0.9 <= elapsed < 2.4  # ceil(8 / 3) x 0.3 s, not 8 x 0.3 s


def _answered_beside_a_fast_arm(experiment, monkeypatch, slow: dict, threads: int, per_arm: int) -> dict:
    """Run a slow arm (``slow``'s settings) beside a fast one in a single job on ``threads``
    threads, ``per_arm`` attempts each; every attempt answered on its first claim. Returns
    when each arm's attempts were answered, in order."""
    monkeypatch.setattr(settings, "PRBENCH_THREADS_PER_JOB", threads)
    monkeypatch.setattr(settings, "PRBENCH_ATTEMPTS_PER_JOB", 2 * per_arm)
    do_replace_arms(
        experiment,
        [
            ArmSpec("slow", "mock", "m", {"mode": "oracle", **slow}),
            ArmSpec("fast", "mock", "m", {"mode": "oracle", "latency_ms": 10}),
        ],
    )
    experiment.sample_size, experiment.repetitions = per_arm // 2, 2
    experiment.save()
    run = do_start_run(experiment, inference_only=True)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(claims=1).count() == 2 * per_arm
    return {
        label: sorted(run.attempts.filter(arm__label=label).values_list("responded_at", flat=True))
        for label in ("slow", "fast")
    }


@pytest.mark.django_db(transaction=True)
def test_a_full_arm_holds_its_own_slots_not_the_threads_other_arms_need(experiment, monkeypatch):
    """A job takes an attempt's slot before claiming it: attempts of an arm at its limit stay
    queued instead of waiting on threads, so the other arm's attempts run meanwhile."""
    answered = _answered_beside_a_fast_arm(
        experiment, monkeypatch, {"latency_ms": 400, "max_concurrency": 1}, threads=4, per_arm=6
    )
    # Waiting on threads, the slow arm's queued attempts would have filled all four by its
    # second answer, and the fast arm's last ones would have come after several slow ones.
    assert answered["fast"][-1] < answered["slow"][1]


@pytest.mark.django_db(transaction=True)
def test_an_arm_stalled_on_its_provider_does_not_take_the_threads_of_the_arm_beside_it(experiment, monkeypatch):
    """A slow arm with as many slots as the job has threads: once its calls have run well past
    the other arm's pace they stop counting against the job's threads, and the fast arm's
    attempts run on the pool's spare threads meanwhile. Counted like working attempts, the
    slow arm's four calls took all four threads, and the fast arm waited for them."""
    answered = _answered_beside_a_fast_arm(
        experiment, monkeypatch, {"latency_ms": 1500, "max_concurrency": 4}, threads=4, per_arm=8
    )
    assert answered["fast"][-1] < answered["slow"][0]


def test_a_call_is_stalled_past_its_arms_pace_and_an_unheard_arm_past_twice_the_fastest_arms():
    runner = BatchRunner(run_id=1, attempt_ids=[], threads=4)
    runner.usual_s = {1: 0.3}  # arm 1 has answered in 0.3 s; arm 2 (hanging, say) never has
    with in_flight.provider_call(10), in_flight.provider_call(20):
        began, began_unheard = in_flight.waiting_since(10), in_flight.waiting_since(20)
        assert began is not None and began_unheard is not None
        assert not runner._stalled(10, 1, began + 1.1) and runner._stalled(10, 1, began + 1.3)  # 4 x 0.3 s
        # 2 x 0.3 s
        assert not runner._stalled(20, 2, began_unheard + 0.55) and runner._stalled(20, 2, began_unheard + 0.65)
        runner.usual_s = {}  # nobody heard from: the floor
        assert not runner._stalled(20, 2, began_unheard + 0.45) and runner._stalled(20, 2, began_unheard + 0.55)
    assert not runner._stalled(20, 2, began_unheard + 60)  # answered: not waiting on anyone


def test_a_job_waiting_for_a_full_arm_is_woken_by_a_release(db):
    held = limits.acquire_slots("full-arm", 1, 1)
    threading.Timer(0.2, limits.release_slots, ("full-arm", held)).start()
    started = time.monotonic()
    limits.wait_for_release(["other-arm", "full-arm"], 5)
    assert time.monotonic() - started < limits.WAKE_S  # woken by the release, not by the timeout
    assert limits.waiting_for(["other-arm", "full-arm"]) == limits.Waiting()


def test_slots_are_released_and_waiting_is_counted(db):
    with limits.arm_slot("test-arm", 1):
        results = []
        waiter = threading.Thread(target=lambda: results.append(_take("test-arm")))
        waiter.start()
        time.sleep(0.2)
        assert limits.waiting_for(["test-arm"]) == limits.Waiting(for_slot=1, for_rate_limit=0)
    waiter.join(5)
    assert results == ["got it"] and limits.waiting_for(["test-arm"]) == limits.Waiting()
    assert limits.get_connection().zcard(limits.slots_key("test-arm")) == 0


def _take(key):
    with limits.arm_slot(key, 1):
        return "got it"


def test_slots_are_taken_in_batches_up_to_the_free_count(db):
    held = limits.acquire_slots("batch-arm", 3, 5)
    assert len(held) == 3 and limits.acquire_slots("batch-arm", 3, 1) == []
    limits.release_slots("batch-arm", held[:1])
    limits.release_slots("batch-arm", held[:1])  # twice is harmless
    assert len(limits.acquire_slots("batch-arm", 3, 5)) == 1


def test_a_held_slot_serves_every_try_and_the_caller_frees_it(db):
    from providers import gateway
    from providers.types import ArmSpec as ProviderArm
    from providers.types import CompletionRequest, Message

    request = CompletionRequest(messages=(Message("user", "hi"),), seed_key="1:t:a:0")
    ok = gateway.prepare(0, ProviderArm("mock", "m", {"mode": "empty", "max_concurrency": 1}, key="held-ok"))
    [slot] = gateway.hold_slots(ok, 1)
    assert _finishes(lambda: gateway.call(ok, request, slot))  # no second slot wanted: with limit 1 it would wait
    assert limits.get_connection().zscore(limits.slots_key("held-ok"), slot) is not None  # the caller frees it
    gateway.release_slots(ok, [slot])
    assert limits.get_connection().zcard(limits.slots_key("held-ok")) == 0

    config = {"mode": "error", "max_concurrency": 1, "max_retries": 1, "retry_base_ms": 1}
    failing = gateway.prepare(0, ProviderArm("mock", "m", config, key="held-fail"))
    [slot] = gateway.hold_slots(failing, 1)
    errors: list[ProviderError] = []

    def call_failing():
        try:
            gateway.call(failing, request, slot)
        except ProviderError as error:
            errors.append(error)

    # The retry runs in the held slot (with limit 1, wanting a second one it would wait).
    assert _finishes(call_failing)
    assert errors[0].retries == 1
    assert limits.get_connection().zscore(limits.slots_key("held-fail"), slot) is not None  # still the caller's
    gateway.release_slots(failing, [slot])
    assert limits.get_connection().zcard(limits.slots_key("held-fail")) == 0


def test_a_worker_starts_its_attempt_threads_before_its_first_job(db, monkeypatch):
    from experiments import jobs
    from experiments.worker import AttemptWorker
    from prbench.queues import get_queue

    monkeypatch.setattr(settings, "PRBENCH_THREADS_PER_JOB", 5)
    monkeypatch.setattr(jobs, "_pool", None)
    monkeypatch.setattr(jobs, "_pool_size", 0)
    AttemptWorker([get_queue()], connection=limits.get_connection()).work(burst=True)  # nothing queued
    # The job's five, and room for attempts stalled on their provider.
    assert jobs._pool is not None and jobs._pool_size == 5 * (1 + jobs.STALLED_ROOM)
    assert len(jobs._pool._threads) == jobs._pool_size
    jobs._pool.shutdown()


def _finishes(function, timeout=5.0) -> bool:
    """Run ``function`` on a thread; whether it returned in time (a broken limit would
    otherwise hang the suite instead of failing it)."""
    thread = threading.Thread(target=function, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


def test_a_job_of_many_threads_opens_a_connection_for_each_past_redis_pys_default_limit(db, monkeypatch):
    """redis-py's pool refuses a 101st connection unless told otherwise; a 128-thread job's
    pool opens one for each of its 384 threads before its first call."""
    from experiments import jobs

    monkeypatch.setattr(settings, "PRBENCH_THREADS_PER_JOB", 128)
    monkeypatch.setattr(jobs, "_pool", None)
    monkeypatch.setattr(jobs, "_pool_size", 0)
    jobs.warm_attempt_pool()
    assert jobs._pool is not None and len(jobs._pool._threads) == 128 * (1 + jobs.STALLED_ROOM)
    jobs._pool.shutdown()
