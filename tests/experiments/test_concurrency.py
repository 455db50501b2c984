"""Threads inside a job overlap provider calls; the arm's limit holds across all of them."""

import threading
import time

import pytest
from django.conf import settings

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import AttemptStatus, RunStatus
from providers import limits
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
