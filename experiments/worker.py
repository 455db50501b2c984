"""The RQ worker class PRBench runs (settings.RQ["WORKER_CLASS"])."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from django.db import DatabaseError, close_old_connections, connection
from redis.exceptions import RedisError
from rq.job import Job
from rq.queue import Queue
from rq.worker import SimpleWorker
from structlog.contextvars import bind_contextvars, clear_contextvars

from datasets.environments import serves, set_this_process_capabilities, worker_capabilities
from evaluation.environments import SYSTEM_NEED
from experiments import liveness
from experiments.dead_holders import reap_dead_holders
from experiments.jobs import warm_attempt_pool
from experiments.pipeline import stop_claiming
from prbench.forks import keep_sockets_from_forked_children
from prbench.queues import get_queue, needs_queues

logger = logging.getLogger(__name__)

# How long an idle worker blocks on its queues before it looks for needs queues registered
# since (one HGETALL): a new recipe's work is picked up within this many seconds.
NEEDS_REFRESH_S = 5


class AttemptWorker(SimpleWorker):
    """RQ's in-process SimpleWorker (see settings) whose attempt threads and their Redis
    connections are ready before its first job, not started while that job's first
    attempts wait for them.

    A worker that listens to "default" also serves every needs queue (prbench/queues.py)
    whose needs it has: its interpreters, and the system packages recipes name. It looks
    again between jobs and every ``NEEDS_REFRESH_S`` while idle, and advertises what it has
    with its lease. Needs queues come first, the most specific first: a worker with Python
    3.9 is the scarce thing, and the work only it can do should not wait while it takes
    work that any worker could.
    """

    def __init__(self, queues: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(queues, *args, **kwargs)
        self.base_queues = list(self.queues)
        self.serves_needs = any(queue.name == "default" for queue in self.base_queues)
        self.known_needs: dict[str, tuple[str, ...]] | None = None
        self.capabilities: tuple[str, ...] = ()

    def work(self, burst: bool = False, *args: Any, **kwargs: Any) -> bool:
        if not burst:
            # The scheduler RQ forks from a long-running worker must not keep its database
            # sessions open after it dies (prbench/forks.py); a burst worker forks none.
            keep_sockets_from_forked_children()
        liveness.heartbeat()  # alive from the start, not only from its first claim
        warm_attempt_pool()
        self.listen_to_served_queues()
        self.reap_dead_workers()
        return super().work(burst, *args, **kwargs)

    def reap_dead_workers(self) -> None:
        """Before its first job, free what workers that died on this machine still hold (a
        pool killed and restarted): their slots would otherwise make it wait, and their
        attempts would come back only once their leases ran out."""
        try:
            report = reap_dead_holders()
        except (DatabaseError, RedisError) as exc:  # the sweep will do it; the worker starts anyway
            logger.warning("could not reap dead workers: %s: %s", type(exc).__name__, exc)
            _close_old_connections()
            return
        if report["dead_workers"] or report["freed_slots"]:
            logger.info("reaped dead workers: %s", report)

    def listen_to_served_queues(self) -> None:
        """Listen to the needs queues this worker can serve (as well as its own), and
        advertise its capabilities; the capabilities are worked out again only when the set
        of needs queues changed."""
        if not self.serves_needs:
            return
        try:
            known = needs_queues()
            if known == self.known_needs:
                return
            named = {need for needs in known.values() for need in needs if need.startswith(SYSTEM_NEED)}
            self.capabilities = worker_capabilities(also_probe={need.removeprefix(SYSTEM_NEED) for need in named})
        except (DatabaseError, RedisError) as exc:
            # Between jobs, not in one: a database or Redis outage must not end the worker.
            # It goes on with the queues it had, and looks again next time.
            logger.warning("could not look for needs queues: %s: %s", type(exc).__name__, exc)
            _close_old_connections()  # a connection the database dropped is not tried again
            return
        self.known_needs = known
        set_this_process_capabilities(self.capabilities)
        liveness.advertise(self.capabilities)
        served = [name for name, needs in known.items() if serves(self.capabilities, needs)]
        served.sort(key=lambda name: (-len(known[name]), name))
        self.queues = [*(get_queue(name) for name in served), *self.base_queues]
        self._ordered_queues = self.queues[:]

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        if timeout is None:  # burst: one look at each queue it serves
            self.listen_to_served_queues()
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        idle_since = time.monotonic()
        while True:
            self.listen_to_served_queues()
            wait = min(timeout, NEEDS_REFRESH_S)
            if max_idle_time is not None:
                left = max_idle_time - (time.monotonic() - idle_since)
                if left <= 0:
                    return None
                wait = min(wait, max(1, math.ceil(left)))
            # RQ's own loop blocks again after a timeout on the same queues; given an idle
            # limit of one wait, it returns instead, and the queues are looked at again.
            result = super().dequeue_job_and_maintain_ttl(wait, max_idle_time=wait)
            if result is not None:
                return result

    def execute_job(self, job: Job, queue: Queue) -> None:
        # What Django does around every request, around every job: a connection the database
        # dropped (a restart, an idle timeout) is replaced, not reused by every later job.
        _close_old_connections()
        # Each job's log lines carry its own context and nothing of the job before.
        clear_contextvars()
        bind_contextvars(job=job.id)
        try:
            with liveness.keeping_job_alive(self, job):
                super().execute_job(job, queue)
        finally:
            clear_contextvars()
            _close_old_connections()

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        # The lease thread renews RQ's record of the running job, so it can be short: the
        # job of a worker that died drops out of the started registry within two leases,
        # and the sweep then rebuilds the jobs of its run's queued attempts.
        return liveness.rq_entry_seconds()

    def request_stop(self, signum: Any, frame: Any) -> None:
        # A warm shutdown waits for the current job, which may be working through a whole
        # run: it now finishes the calls in flight and claims nothing more. What it leaves
        # queued, requeue_stale gives a new job.
        stop_claiming.set()
        super().request_stop(signum, frame)


def _close_old_connections() -> None:
    # Inside a transaction (a test running jobs in its own, or the web process working a
    # burst) the connection is not between jobs: closing it would end that transaction.
    if not connection.in_atomic_block:
        close_old_connections()
