"""Queueing a run's attempt jobs, and asking Redis whether it still holds any.

The job itself is experiments.jobs.execute_attempts, named here by its dotted path (RQ
imports it in the worker): the jobs module imports the pipeline, which queues attempts it
gives back through this module, and naming the job keeps the two from importing each other.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from itertools import islice

from django.conf import settings
from rq.registry import StartedJobRegistry

from prbench.queues import get_queue

EXECUTE_ATTEMPTS = "experiments.jobs.execute_attempts"


def _batches(items: Iterable[int], size: int) -> Iterable[list[int]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def job_prefix(run_id: int) -> str:
    return f"run-{run_id}-"


def enqueue_attempts(run_id: int, attempt_ids: Iterable[int]) -> int:
    """Queue the attempts in batches (one RQ round trip per batch, not per attempt)."""
    queue = get_queue()
    jobs = [
        queue.prepare_data(
            EXECUTE_ATTEMPTS,
            args=(run_id, batch),
            job_id=f"{job_prefix(run_id)}{uuid.uuid4().hex}",
            result_ttl=0,
            # No RQ timeout: its SIGALRM exception would land inside an attempt and be scored
            # as that attempt's failure. Attempts bound themselves (provider timeouts and
            # retry deadline, the validation kill), and a hung worker is what requeue_stale
            # recovers from.
            timeout=-1,
            failure_ttl=7 * 24 * 3600,
        )
        for batch in _batches(attempt_ids, settings.PRBENCH_ATTEMPTS_PER_JOB)
    ]
    if jobs:
        queue.enqueue_many(jobs)
    return len(jobs)


def run_has_jobs(run_id: int) -> bool:
    """Whether Redis still holds queued or executing work for this run."""
    queue = get_queue()
    prefix = job_prefix(run_id)
    started = StartedJobRegistry(queue=queue).get_job_ids()
    return any(job_id.startswith(prefix) for job_id in [*queue.get_job_ids(), *started])
