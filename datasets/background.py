"""The datasets page's background jobs (an upload's check and import, a mining run): queued
once their row is committed, and found again by the id their row keeps, so a job a dead
worker abandoned can be told from one that is queued or under way."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from prbench.queues import get_queue, queue_for_needs

# A row that says it is busy but has not moved for this long, and whose job Redis no longer
# holds, was abandoned (its worker died, or the web process running it inline): it may be
# queued again. Long enough for the last progress write of an inline run to land.
ABANDONED_AFTER = timedelta(minutes=1)
WAITING = (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


def enqueue_on_commit(
    func: Callable[[int], object], row_id: int, job_id: str, timeout: int, needs: tuple[str, ...] = ()
) -> None:
    """Queue ``func(row_id)`` once the transaction that made (or reset) the row commits: a
    worker must never look for a row it cannot see yet. ``needs``: what its worker must have
    (prbench/queues.py's needs queues); "default" for nothing."""

    def enqueue() -> None:
        queue_for_needs(needs).enqueue(
            func, row_id, job_id=job_id, job_timeout=timeout, result_ttl=3600, failure_ttl=7 * 24 * 3600
        )

    transaction.on_commit(enqueue)


def job_is_alive(job_id: str) -> bool:
    """Whether Redis still holds the job as waiting or under way."""
    if not job_id:
        return False
    queue = get_queue()
    if job_id in StartedJobRegistry(queue=queue).get_job_ids():
        return True
    try:
        job = Job.fetch(job_id, connection=queue.connection)
    except NoSuchJobError:
        return False
    return job.get_status() in WAITING


def is_abandoned(busy: bool, job_id: str, updated_at: datetime) -> bool:
    if not busy or updated_at > timezone.now() - ABANDONED_AFTER:
        return False
    return not job_is_alive(job_id)
