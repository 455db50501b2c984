"""Reaping the processes known dead: their worker leases, arm slots and claimed attempts.

A worker SIGKILLed with its pool leaves a lease that looks alive for up to a lease
(PRBENCH_WORKER_LEASE_SECONDS) and arm slots that look held for up to theirs
(providers/limits.py): a restarted pool idled until both ran out. On the same machine we need
not wait: the lease's pid is not running, or is another process (experiments/liveness.py). Its
lease goes, its slots are freed and its attempts are claimed again at once. A worker does this
as it starts, and the recovery sweep on every pass; the sweep also frees the slots of any lease
that ran out (a worker dead on another machine), so no slot outlives its holder's lease.
"""

from __future__ import annotations

import logging
import socket
from datetime import timedelta

from django.conf import settings
from django.db.models.functions import Now

from experiments.liveness import is_dead_here, process_scope
from experiments.models import WorkerLease
from experiments.recovery import requeue_abandoned_attempts
from providers import limits

logger = logging.getLogger(__name__)


def reap_dead_holders() -> dict[str, int]:
    """Delete the leases of processes known dead, free the slots of every holder without a live
    lease, and take back the dead processes' attempts (the sweep's own reclaim): what a worker
    does as it starts, before the next sweep comes round.

    Counts: ``dead_workers``, leases of dead processes deleted; ``freed_slots``, arm slots
    freed; and, when some process was dead, what ``requeue_abandoned_attempts`` did."""
    report = free_dead_holders()
    if report["dead_workers"]:
        stale_after = timedelta(seconds=settings.PRBENCH_STALE_AFTER_SECONDS)
        for name, count in requeue_abandoned_attempts(stale_after).items():
            report[name] = report.get(name, 0) + count
    return report


def free_dead_holders(_stale_after: timedelta | None = None) -> dict[str, int]:
    """The recovery sweep's first step (settings.PRBENCH_RECOVERY_STEPS): the leases of processes
    known dead go, and every holder without a live lease gives up its slots; the next step
    takes back their attempts. Its own clock: ``stale_after`` is not used."""
    return {"dead_workers": _delete_leases_of_dead_processes(), "freed_slots": _free_slots_without_live_lease()}


def _delete_leases_of_dead_processes() -> int:
    # Only unexpired leases are looked at: an expired one is dead to everyone already.
    here = WorkerLease.objects.filter(hostname=socket.gethostname()[:255], process_scope=process_scope())
    leases = here.filter(expires_at__gt=Now()).exclude(process_scope="")
    dead = [lease.pk for lease in leases if is_dead_here(lease)]
    if dead:
        logger.info("reaping %s worker lease(s) of processes no longer running", len(dead))
    return WorkerLease.objects.filter(pk__in=dead).delete()[0]


def _free_slots_without_live_lease() -> int:
    holders = limits.slot_holders()
    if not holders:
        return 0
    alive = set(WorkerLease.objects.filter(name__in=holders, expires_at__gt=Now()).values_list("name", flat=True))
    return limits.release_holders_slots(holders - alive)
