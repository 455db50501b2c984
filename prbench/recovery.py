"""The recovery sweep: one pass that finds, in Postgres, the work a crash or a lost queue left.

Postgres is the source of truth, so whatever a dead worker or an emptied Redis dropped can be
found again from the rows. Each app contributes the steps that know its own rows; this module
knows none of them. ``PRBENCH_RECOVERY_STEPS`` (settings) names them by dotted path, and they
run in that list's order, the order the sweep has always had:

0. ``experiments``: delete the leases of workers known dead on this machine, and free the arm
   slots of every holder without a live lease;
1. ``experiments``: take back attempts whose worker is gone, rebuild jobs lost with Redis,
   finish runs with nothing left to do, drop expired worker leases;
2. ``experiments``: queue answered attempts whose evaluator job was lost;
3. ``experiments``: refresh the boards of runs recorded into since their last refresh;
4. ``orgs``: queue webhook deliveries overdue with nobody sending them;
5. ``orgs``: delete API key uses older than ``PRBENCH_AUDIT_KEY_USES_DAYS`` from the audit log.

A step is ``step(stale_after: timedelta) -> dict[str, int]``: it gets the sweep's staleness
limit (the steps that have their own clocks ignore it) and answers what it did as counts by
name, which ``requeue_stale`` prints. Steps are not isolated from one another: one that raises
ends that pass, as it always has, and ``sweep_forever`` logs the error and sweeps again next
round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.utils.module_loading import import_string
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

RecoveryStep = Callable[[timedelta], dict[str, int]]


def recovery_steps() -> list[RecoveryStep]:
    return [import_string(path) for path in settings.PRBENCH_RECOVERY_STEPS]


def run_recovery_sweep(stale_after_seconds: int | None = None) -> dict[str, int]:
    """Run every step once, in order; what they did, as counts by name.

    ``stale_after_seconds``: attempts claimed before worker leases existed (no claimer
    recorded), and answers waiting for a verdict, count as abandoned once older than this;
    default ``PRBENCH_STALE_AFTER_SECONDS``."""
    limit = settings.PRBENCH_STALE_AFTER_SECONDS if stale_after_seconds is None else stale_after_seconds
    report: dict[str, int] = {}
    for step in recovery_steps():
        report.update(step(timedelta(seconds=limit)))
    return report


def sweep_forever(
    every_s: float,
    stale_after_s: int | None = None,
    report: Callable[[dict[str, int]], None] = lambda report: None,
    rounds: int | None = None,
) -> None:
    """Recover abandoned work every ``every_s`` seconds (``rounds`` times, or for ever).

    The sweep is what recovers from outages, so one must not end it: a database or Redis error
    is logged and the next round tries again on a fresh connection."""
    done = 0
    while rounds is None or done < rounds:
        done += 1
        try:
            report(run_recovery_sweep(stale_after_s))
        except (DatabaseError, RedisError) as exc:
            logger.warning("recovery sweep failed, retrying in %ss: %s: %s", every_s, type(exc).__name__, exc)
        finally:
            close_old_connections()  # a connection the failure broke is not reused
        if rounds is None or done < rounds:
            time.sleep(every_s)
