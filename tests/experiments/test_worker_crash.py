"""A real worker process killed mid-attempt loses nothing and double-counts nothing."""

import csv
import io
import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from experiments import answer_journal
from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import Artifact, Attempt, AttemptStatus, RunStatus, WorkerLease
from prbench.queues import get_connection
from prbench.recovery import run_recovery_sweep
from providers.models import ProviderCredential
from tests.conftest import api_client, client_for, command_export, make_api_key, work_queue
from tests.providers.contracts import gpt4o_answer
from tests.providers.fake_server import FakeProvider, Reply

LEASE_S = 2  # the spawned worker's lease: short, so its death is noticed quickly here


def spawn_worker(lease_s: float = LEASE_S, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="prbench.settings_test",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        PRBENCH_WORKER_LEASE_SECONDS=str(lease_s),
    )
    manage = str(settings.BASE_DIR / "manage.py")
    return subprocess.Popen(
        [sys.executable, manage, "rqworker", "default", *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_until(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def reclaimed_after_its_lease() -> int:
    """Sweep until the dead worker's attempts are back in the queue (its lease ran out): how many."""
    reclaimed = 0

    def swept() -> bool:
        nonlocal reclaimed
        reclaimed += run_recovery_sweep()["reclaimed"]
        return reclaimed > 0

    assert wait_until(swept, 5 * LEASE_S)
    return reclaimed


def use_openai_through(provider: FakeProvider, experiment, org) -> None:
    """The experiment's one arm is OpenAI's, reached through ``provider``, never retried."""
    credential = ProviderCredential(org=org, provider="openai", base_url=provider.url + "/v1")
    credential.set_api_key("sk-test-crash-0000000")
    credential.save()
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0})])


@pytest.mark.django_db(transaction=True)
def test_killed_worker(experiment, org, alice):
    provider = FakeProvider()  # counts every call the provider would bill
    # Slow answers so the worker is certainly mid-call when it is killed.
    provider.default = Reply(200, gpt4o_answer(), delay_s=4)
    use_openai_through(provider, experiment, org)
    run = do_start_run(experiment, inference_only=True)
    worker = spawn_worker()
    try:
        assert wait_until(lambda: len(provider.seen) == 4), "the worker never called the provider"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        # The job's threads had claimed all four attempts together when the worker died.
        stuck = set(run.attempts.filter(status=AttemptStatus.RUNNING).values_list("pk", flat=True))
        assert len(stuck) == 4

        # Back in the queue on the first sweep after the dead worker's lease ran out.
        assert (
            reclaimed_after_its_lease() == 4 and not WorkerLease.objects.filter(expires_at__lt=timezone.now()).exists()
        )
        provider.default = Reply(200, gpt4o_answer())
        work_queue()
    finally:
        if worker.poll() is None:
            worker.kill()
        provider.close()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == 4
    assert dict(run.attempts.values_list("pk", "claims")) == dict.fromkeys(stuck, 2)
    assert len(provider.seen) == 4 + 4  # one call per claim: the dead worker's, then the new one's
    assert not Artifact.objects.filter(attempt__run=run).exists()  # inference-only: nothing validated
    # The dead worker's calls were in flight: the new claim's calls pay for them again, counted.
    assert list(run.attempts.values_list("repeat_calls", flat=True)) == [1] * 4
    rows = list(csv.DictReader(io.StringIO(command_export(run, "csv"))))
    assert [row["repeat_calls"] for row in rows] == ["1"] * 4
    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200
    assert "4 calls were made again after their worker died mid-call" in page.content.decode()
    reader = api_client(make_api_key(org, scopes=("read",)))
    assert reader.get(f"/api/runs/{run.code}").json()["repeat_calls"] == 4
    assert reader.get(f"/api/attempts/{run.attempts.first().code}").json()["repeat_calls"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_after_the_answer_arrived_pays_for_nothing_again(experiment, org, alice):
    provider = FakeProvider()
    # A slow answer, so the row is locked below while the call is still in flight.
    provider.default = Reply(200, gpt4o_answer(), delay_s=2)
    use_openai_through(provider, experiment, org)
    experiment.sample_size = 1
    experiment.save()
    run = do_start_run(experiment, inference_only=True)
    attempt = run.attempts.get()
    journal = get_connection()
    worker = spawn_worker()
    try:
        # The attempt's row is locked here, so the worker cannot record the answer it gets:
        # it is killed with the answer journalled and not recorded.
        assert wait_until(lambda: len(provider.seen) == 1), "the worker never called the provider"
        with transaction.atomic():
            Attempt.objects.select_for_update().get(pk=attempt.pk, status=AttemptStatus.RUNNING)
            assert wait_until(lambda: journal.exists(answer_journal.journal_key(attempt.pk)))
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
        assert reclaimed_after_its_lease() == 1
        provider.default = Reply(200, gpt4o_answer())
        work_queue()
    finally:
        if worker.poll() is None:
            worker.kill()
        provider.close()
    attempt.refresh_from_db()
    assert (attempt.status, attempt.claims, attempt.repeat_calls) == (AttemptStatus.COMPLETED, 2, 0)
    assert len(provider.seen) == 1  # recovered from the journal: the provider was asked once
    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200 and "made again" not in page.content.decode()
