"""A real worker process killed mid-attempt loses nothing and double-counts nothing."""

import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection

from experiments.actions import ArmSpec, do_replace_arms, do_requeue_stale, do_start_run
from experiments.models import Artifact, AttemptStatus, RunStatus
from tests.conftest import work_queue


def spawn_worker() -> subprocess.Popen:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="prbench.settings_test",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        REDIS_URL=settings.REDIS_URL,
    )
    manage = str(settings.BASE_DIR / "manage.py")
    return subprocess.Popen(
        [sys.executable, manage, "rqworker", "default"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_until(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.django_db(transaction=True)
def test_killed_worker(experiment):
    # Slow answers so the worker is certainly mid-attempt when it is killed.
    do_replace_arms(experiment, [ArmSpec("slow", "mock", "m", {"mode": "oracle", "latency_ms": 4000})])
    run = do_start_run(experiment, inference_only=True)
    worker = spawn_worker()
    try:
        assert wait_until(lambda: run.attempts.filter(status=AttemptStatus.RUNNING).exists()), "worker never started"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    # The job's threads had claimed all four attempts together when the worker died.
    stuck = set(run.attempts.filter(status=AttemptStatus.RUNNING).values_list("pk", flat=True))
    assert len(stuck) == 4

    report = do_requeue_stale(stale_after_seconds=0)
    assert report.reclaimed == 4
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == 4
    assert dict(run.attempts.values_list("pk", "claims")) == dict.fromkeys(stuck, 2)
    assert Artifact.objects.filter(attempt__run=run, kind="patch").count() == 4
