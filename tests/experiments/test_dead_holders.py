"""Workers known dead are reaped at once: their leases, arm slots and claimed attempts.

A whole pool SIGKILLed and restarted used to wait out the dead workers' slot leases and worker
leases; now a worker starting on the same machine sees their processes are gone."""

import os
import signal
import socket
import subprocess
import sys
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.dead_holders import reap_dead_holders
from experiments.liveness import process_scope, process_start_ticks
from experiments.models import AttemptStatus, RunStatus, WorkerLease
from experiments.pipeline import run_arm_spec
from prbench.queues import get_connection
from providers import limits
from providers.models import ProviderCredential
from tests.conftest import work_queue
from tests.experiments.test_worker_crash import spawn_worker, wait_until
from tests.providers.contracts import gpt4o_answer
from tests.providers.fake_server import FakeProvider, Reply

ARM = "dead-holder-arm"


def slot_tokens(arm_key: str) -> list[str]:
    return [limits._text(token) for token in get_connection().zrange(limits.slots_key(arm_key), 0, -1)]


def lease(*, hostname: str | None = None, pid: int | None = None, ticks: int | None = None, expires_in_s=600):
    """A lease as a worker on this machine would hold it, unless told otherwise."""
    pid = os.getpid() if pid is None else pid
    now = timezone.now()
    return WorkerLease.objects.create(
        name=uuid.uuid4().hex,
        hostname=socket.gethostname()[:255] if hostname is None else hostname,
        pid=pid,
        process_scope=process_scope(),
        process_start_ticks=process_start_ticks(pid) if ticks is None else ticks,
        started_at=now,
        expires_at=now + timedelta(seconds=expires_in_s),
    )


def hold_slots(holder: str, count: int, limit: int = 8) -> list[str]:
    """Slots taken in ``holder``'s name, as its process would have taken them."""
    provider = limits._holder_provider
    limits.set_holder_provider(lambda: holder)
    try:
        return limits.acquire_slots(ARM, limit, count)
    finally:
        limits.set_holder_provider(provider)


@pytest.mark.django_db(transaction=True)
def test_a_starting_worker_reaps_a_killed_workers_lease_slots_and_attempts(experiment, org):
    provider = FakeProvider()
    provider.default = Reply(200, gpt4o_answer(), delay_s=30)  # holds every call (and its slot)
    credential = ProviderCredential(org=org, provider="openai", base_url=provider.url + "/v1")
    credential.set_api_key("sk-test-reap-0000000")
    credential.save()
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0, "max_concurrency": 4})])
    run = do_start_run(experiment, inference_only=True)
    arm_key = run_arm_spec(run.arms.get()).key
    # A lease far longer than the test: only seeing its process gone can end it early.
    worker = spawn_worker(lease_s=600)
    try:
        assert wait_until(lambda: len(provider.seen) == 4), "the worker never called the provider"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        dead = WorkerLease.objects.get(pid=worker.pid)
        assert dead.expires_at > timezone.now()
        held = slot_tokens(arm_key)  # the arm is full, every slot the dead worker's
        assert len(held) == 4 and {limits.token_holder(token) for token in held} == {dead.name}
        stuck = set(
            run.attempts.filter(status=AttemptStatus.RUNNING, claimed_by=dead.name).values_list("pk", flat=True)
        )
        assert len(stuck) == 4

        provider.default = Reply(200, gpt4o_answer())
        work_queue()  # a new worker: it reaps the dead one as it starts, then takes its work
    finally:
        if worker.poll() is None:
            worker.kill()
        provider.close()
    assert not WorkerLease.objects.filter(name=dead.name).exists()
    assert not [token for token in slot_tokens(arm_key) if limits.token_holder(token) == dead.name]
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert dict(run.attempts.values_list("pk", "status")) == dict.fromkeys(stuck, AttemptStatus.COMPLETED)
    assert dict(run.attempts.values_list("pk", "claims")) == dict.fromkeys(stuck, 2)
    # Each attempt the provider never answered was asked once more, no more.
    assert len(provider.seen) == 4 + 4


@pytest.mark.django_db(transaction=True)
def test_a_lease_whose_process_is_running_is_kept_with_its_slots():
    alive = lease()  # this very process, start time and all
    held = hold_slots(alive.name, 2)
    assert reap_dead_holders()["dead_workers"] == 0
    assert WorkerLease.objects.filter(pk=alive.pk).exists()
    assert sorted(slot_tokens(ARM)) == sorted(held)


@pytest.mark.django_db(transaction=True)
def test_a_lease_whose_pid_is_now_another_process_is_reaped_with_its_slots():
    # The pid runs (this process) but started at another time: a later process given the pid.
    reused = lease(ticks=process_start_ticks(os.getpid()) - 1)
    hold_slots(reused.name, 2)
    kept = hold_slots(lease().name, 1)
    report = reap_dead_holders()
    assert report["dead_workers"] == 1 and report["freed_slots"] == 2
    assert not WorkerLease.objects.filter(pk=reused.pk).exists()
    assert slot_tokens(ARM) == kept


@pytest.mark.django_db(transaction=True)
def test_a_killed_process_its_parent_has_not_collected_yet_is_dead():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        killed = lease(pid=child.pid)  # its start time, recorded while it ran
        child.send_signal(signal.SIGKILL)
        assert wait_until(lambda: process_start_ticks(child.pid) is None)  # a zombie: not waited for
        assert reap_dead_holders()["dead_workers"] == 1
        assert not WorkerLease.objects.filter(pk=killed.pk).exists()
    finally:
        child.kill()
        child.wait()


@pytest.mark.django_db(transaction=True)
def test_a_lease_on_another_host_is_left_to_its_expiry_then_its_slots_go():
    # Pid 2**22 + 1 runs nowhere, but on another machine that says nothing.
    elsewhere = lease(hostname="another-host", pid=2**22 + 1, ticks=12345)
    held = hold_slots(elsewhere.name, 2)
    assert reap_dead_holders() == {"dead_workers": 0, "freed_slots": 0}
    assert WorkerLease.objects.filter(pk=elsewhere.pk).exists() and sorted(slot_tokens(ARM)) == sorted(held)

    WorkerLease.objects.filter(pk=elsewhere.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    call_command("requeue_stale")  # the sweep: the lease ran out, and its slots go with it
    assert slot_tokens(ARM) == []
    assert not WorkerLease.objects.filter(pk=elsewhere.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_dead_holders_slots_wake_a_waiter():
    dead = lease(pid=2**22 + 1, ticks=12345)  # nothing runs with this pid here
    hold_slots(dead.name, 1, limit=1)
    waiting = limits._counted_as_waiting(limits.waiting_key(ARM))
    with waiting:
        assert reap_dead_holders()["freed_slots"] == 1
        # Woken as a release wakes: one wake-up is pushed for the one waiter.
        assert get_connection().llen(limits.freed_key(ARM)) == 1
    assert limits.acquire_slots(ARM, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_slots_of_a_process_without_a_lease_are_left_to_their_own_lease():
    # The web server testing a connection: no lease says whether it lives, so nobody frees its
    # slot early; it goes when its lease runs out, as before holders existed.
    provider = limits._holder_provider
    limits.set_holder_provider(lambda: None)
    try:
        held = limits.acquire_slots(ARM, 8, 1)
    finally:
        limits.set_holder_provider(provider)
    assert limits.token_holder(held[0]) is None and held[0].startswith(limits.UNLEASED_PREFIX)
    call_command("requeue_stale")
    assert slot_tokens(ARM) == held
