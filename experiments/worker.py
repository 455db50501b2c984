"""The RQ worker class PRBench runs (settings.RQ["WORKER_CLASS"])."""

from __future__ import annotations

from typing import Any

from django.db import close_old_connections, connection
from rq.job import Job
from rq.queue import Queue
from rq.worker import SimpleWorker
from structlog.contextvars import bind_contextvars, clear_contextvars

from experiments import liveness
from experiments.jobs import warm_attempt_pool
from experiments.pipeline import stop_claiming


class AttemptWorker(SimpleWorker):
    """RQ's in-process SimpleWorker (see settings) whose attempt threads and their Redis
    connections are ready before its first job, not started while that job's first
    attempts wait for them."""

    def work(self, *args: Any, **kwargs: Any) -> bool:
        liveness.heartbeat()  # alive from the start, not only from its first claim
        warm_attempt_pool()
        return super().work(*args, **kwargs)

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
