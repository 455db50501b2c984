"""This process's liveness, for the recovery sweep: a lease in Postgres that a thread renews.

Whether a claimed attempt is abandoned is decided by whether the process that claimed it is
alive, not by how long the attempt has been running: an attempt waiting minutes for a slow
provider or a busy arm is never taken from its live worker (and paid for twice), and the
attempts of a killed worker go back to the queue as soon as its lease runs out
(PRBENCH_WORKER_LEASE_SECONDS) instead of after a fixed ten minutes.

A lease also says which process it is (its pid namespace and start time), so a process on the
same machine can see at once that the holder is dead, without waiting for its lease to run out:
experiments/dead_holders.py then frees its arm slots and takes back its attempts.

The same thread keeps RQ's own record of the worker's current job alive. A SimpleWorker
runs its job in its main thread and sends RQ no heartbeat until the job ends, so RQ's
registry cleanup would otherwise take any long job for an abandoned one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db import OperationalError, connection
from django.db.models import DurationField, Value
from django.db.models.functions import Now
from django.utils import timezone
from rq.job import Job
from rq.worker import BaseWorker

from experiments.models import WorkerLease
from providers import limits

logger = logging.getLogger(__name__)

RENEWALS_PER_LEASE = 3  # a lease outlives two failed renewals


def lease_seconds() -> float:
    return settings.PRBENCH_WORKER_LEASE_SECONDS


def rq_entry_seconds() -> int:
    """How long RQ's record of a running job lives without a heartbeat: two leases, so RQ
    forgets the job of a dead worker about when the sweep takes back its attempts."""
    return max(1, math.ceil(2 * lease_seconds()))


class Heartbeat:
    """The lease of one process, and the thread that renews it."""

    def __init__(self) -> None:
        self.name = uuid.uuid4().hex
        self.pid = os.getpid()
        self.process_start_ticks = process_start_ticks(self.pid)
        self.started_at = timezone.now()
        self.renewed = threading.Condition()
        self.renewed_at: float | None = None  # time.monotonic() of the last renewal that committed
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.job: tuple[BaseWorker, Job] | None = None
        self.capabilities: list[str] = []  # advertised with the lease (``advertise``)
        self.thread = threading.Thread(target=self._run, name="worker-lease", daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            self._renew_lease()
            self._keep_job_alive()
            self.wake.wait(lease_seconds() / RENEWALS_PER_LEASE)
            self.wake.clear()

    def _renew_lease(self) -> None:
        # Whatever fails (the database restarting, say), the thread logs it and tries again
        # next tick on a new connection: it is the process's only claim to being alive.
        try:
            # The database's clock, as the sweep's: the hosts' clocks need not agree.
            expires_at = Now() + Value(timedelta(seconds=lease_seconds()), output_field=DurationField())
            capabilities = list(self.capabilities)
            if not WorkerLease.objects.filter(name=self.name).update(expires_at=expires_at, capabilities=capabilities):
                # First renewal, or the sweep deleted a lease that lapsed while this process
                # was stalled: its attempts have been taken back, its new claims need a lease.
                WorkerLease.objects.create(
                    name=self.name,
                    hostname=socket.gethostname()[:255],
                    pid=self.pid,
                    process_scope=process_scope(),
                    process_start_ticks=self.process_start_ticks,
                    started_at=self.started_at,
                    expires_at=expires_at,
                    capabilities=capabilities,
                )
            with self.renewed:
                self.renewed_at = time.monotonic()
                self.renewed.notify_all()
        except Exception as exc:
            logger.warning("could not renew worker lease %s: %s: %s", self.name, type(exc).__name__, exc)
        finally:
            connection.close()  # this thread's own; a broken one is never reused

    def _keep_job_alive(self) -> None:
        current = self.job
        if current is None:
            return
        worker, job = current
        executions = list(worker.executions.values())[:1]  # a copy: the job's thread changes it
        if not executions:
            return
        try:
            worker.maintain_heartbeats(job, executions[0])
        except Exception as exc:
            logger.warning("could not send RQ heartbeat for job %s: %s: %s", job.id, type(exc).__name__, exc)

    def is_current(self) -> bool:
        """Whether the lease was renewed within the last renewal interval (and a half)."""
        renewed_at = self.renewed_at
        interval = lease_seconds() / RENEWALS_PER_LEASE
        return renewed_at is not None and time.monotonic() - renewed_at < 1.5 * interval

    def renew_now(self) -> bool:
        """Renew the lease at once and wait (up to a lease) for it; False if that failed."""
        with self.renewed:
            before = self.renewed_at
            self.wake.set()
            self.renewed.wait_for(lambda: self.renewed_at != before, timeout=lease_seconds())
            return self.renewed_at != before


_lock = threading.Lock()
_heartbeat: Heartbeat | None = None


def heartbeat() -> Heartbeat:
    """This process's heartbeat, started on first use (and again in a forked child, which
    is a process of its own with a lease of its own)."""
    global _heartbeat
    with _lock:
        if _heartbeat is None or _heartbeat.pid != os.getpid() or not _heartbeat.thread.is_alive():
            _heartbeat = Heartbeat()
            _heartbeat.thread.start()
            limits.set_holder_provider(lease_holder)
        return _heartbeat


def lease_holder() -> str | None:
    """The name this process's arm slots are held under: its lease's, once the lease is in the
    database (before, a sweep would take the slots of a lease it cannot find for a dead one's)."""
    beat = _heartbeat
    if beat is None or beat.pid != os.getpid() or beat.renewed_at is None:
        return None
    return beat.name


def process_scope() -> str:
    """Where a pid names one process: this kernel boot's pid namespace; "" where unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot_id:
            return f"{boot_id.read().strip()}/{os.readlink('/proc/self/ns/pid')}"[:100]
    except OSError:
        return ""


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (/proc/<pid>/stat's 22nd field);
    None if it is not running (or /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The command name (field 2) may hold spaces and brackets: count from its end.
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    if fields[:1] in (["Z"], ["X"]):  # killed, waiting for its parent to collect it: dead
        return None
    try:
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def is_dead_here(lease: WorkerLease) -> bool:
    """Whether ``lease``'s process is known dead: it ran on this machine, in this pid namespace,
    and its pid is no longer running or is now a different process. A lease from elsewhere, or
    one that did not record its process, is never known dead: its expiry tells."""
    if not lease.process_scope or lease.process_start_ticks is None:
        return False
    if lease.hostname != socket.gethostname()[:255] or lease.process_scope != process_scope():
        return False
    ticks = process_start_ticks(lease.pid)
    if ticks is None:
        return not _hidden_from_us(lease.pid)
    return ticks != lease.process_start_ticks


def _hidden_from_us(pid: int) -> bool:
    """Whether ``pid`` runs as a user whose processes /proc hides from us (``hidepid``): it may
    be the lease's process, alive, and reaping it would pay for its calls twice."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether it may be sent
    except PermissionError:
        return True
    except OSError:
        return False
    return False  # ours and signalable, yet no readable stat: a zombie, dead


def claimer_name() -> str:
    """This process's lease name, for Attempt.claimed_by, once its lease is known to hold:
    an attempt claimed under a lapsed lease could be taken back and paid for twice."""
    beat = heartbeat()
    if not beat.is_current() and not beat.renew_now():
        raise OperationalError("this worker's lease could not be renewed, so it claims nothing")
    return beat.name


def advertise(capabilities: tuple[str, ...]) -> None:
    """Store what this worker can run with its lease (experiments/worker.py), so the product can
    tell work that waits for a worker with Python 3.9 from work that is merely queued; stored
    at once when it changed, then with every renewal."""
    beat = heartbeat()
    if beat.capabilities != list(capabilities):
        beat.capabilities = list(capabilities)
        beat.wake.set()


@contextlib.contextmanager
def keeping_job_alive(worker: BaseWorker, job: Job) -> Iterator[None]:
    """While the block runs, the heartbeat thread also keeps RQ's record of ``job`` alive."""
    beat = heartbeat()
    beat.job = (worker, job)
    try:
        yield
    finally:
        beat.job = None


def stop() -> None:
    """Stop this process's heartbeat (its lease then lapses); for test teardown."""
    global _heartbeat
    with _lock:
        beat, _heartbeat = _heartbeat, None
    if beat is not None and beat.pid == os.getpid():
        beat.stopping.set()
        beat.wake.set()
        beat.thread.join(timeout=10)
