"""A process forked from a worker keeps none of its sockets (prbench/forks.py).

RQ forks its scheduler from a worker. Holding the worker's database socket, an orphaned
scheduler kept a SIGKILLed worker's transaction open, and with it the row locks on the attempts
the worker was recording: the sweep skips locked rows, and they stayed running for good."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from experiments.models import WorkerLease
from prbench.queues import get_queue
from tests.experiments.test_worker_crash import spawn_worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def sockets_of(pid: int) -> set[str]:
    """The sockets process ``pid`` has open, as the kernel names them ("socket:[inode]")."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def children_of(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def forks_of(pid: int) -> list[int]:
    """The children of ``pid`` forked without exec (RQ's scheduler): the same command line. Not
    the interpreters a starting worker runs to see what it has."""
    command = Path(f"/proc/{pid}/cmdline").read_bytes()
    forks = []
    for child in children_of(pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{child}/cmdline").read_bytes() == command:
                forks.append(child)
    return forks


def test_the_scheduler_a_worker_forks_shares_none_of_its_sockets():
    worker = spawn_worker(extra=("--with-scheduler",))
    try:
        assert wait_until(lambda: forks_of(worker.pid), 30), "the worker started no scheduler"
        (scheduler,) = forks_of(worker.pid)
        assert wait_until(lambda: WorkerLease.objects.filter(pid=worker.pid).exists(), 30)
        own = sockets_of(worker.pid)
        assert own, "the worker has no connection open"
        assert not own & sockets_of(scheduler)
        # And it still schedules, on a connection of its own: a job due in a second is run.
        job = get_queue("default").enqueue_in(timedelta(seconds=1), os.getpid, result_ttl=60)
        assert wait_until(lambda: job.get_status(refresh=True) == "finished", 30)
    finally:
        for pid in children_of(worker.pid):
            os.kill(pid, signal.SIGKILL)
        worker.kill()
        worker.wait(timeout=10)


# A worker's part, as a script: it locks a row in a transaction, forks a child that outlives it
# (as RQ forks its scheduler), says so, and waits to be killed.
LOCKS_AND_FORKS = textwrap.dedent(
    """
    import multiprocessing, sys, time
    import django
    django.setup()
    from django.db import transaction
    from experiments.models import WorkerLease
    from prbench.forks import keep_sockets_from_forked_children

    keep_sockets_from_forked_children()
    with transaction.atomic():
        WorkerLease.objects.select_for_update().get(name=sys.argv[1])
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,), daemon=False)
        child.start()
        print(child.pid, flush=True)
        time.sleep(120)
    """
)


def test_a_worker_killed_mid_transaction_releases_its_locks_while_its_fork_lives_on():
    now = timezone.now()
    row = WorkerLease.objects.create(
        name=uuid.uuid4().hex, hostname="here", pid=1, started_at=now, expires_at=now + timedelta(minutes=5)
    )
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="prbench.settings_test",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        PYTHONPATH=str(settings.BASE_DIR),
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", LOCKS_AND_FORKS, row.name], env=env, stdout=subprocess.PIPE, text=True
    )
    child = 0
    try:
        assert worker.stdout is not None
        child = int(worker.stdout.readline())
        assert not _can_lock(row.name)  # the worker holds it
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        # Its child still runs; the worker's session ends with the worker all the same.
        assert wait_until(lambda: _can_lock(row.name), 10), "the killed worker's lock outlived it"
        assert Path(f"/proc/{child}").exists()
    finally:
        worker.kill()
        if child:
            os.kill(child, signal.SIGKILL)


def _can_lock(name: str) -> bool:
    try:
        with transaction.atomic():
            WorkerLease.objects.select_for_update(nowait=True).get(name=name)
    except DatabaseError:
        time.sleep(0.1)
        return False
    return True
