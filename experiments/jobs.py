"""RQ entry points. Thin: they take ids and hand over to the pipeline.

Running any job twice is harmless: each attempt is claimed with a conditional update,
so a duplicate job finds nothing left to claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

from django.conf import settings
from rq.registry import StartedJobRegistry

from experiments.pipeline import finish_run_if_done, run_attempts
from prbench.queues import get_queue


def execute_attempts(run_id: int, attempt_ids: list[int]) -> int:
    """Execute a batch of one run's attempts, overlapping their provider calls on up to
    ``PRBENCH_THREADS_PER_JOB`` threads (each arm's own limit still holds, see
    providers.limits); returns how many this job recorded."""
    threads = max(1, min(len(attempt_ids), settings.PRBENCH_THREADS_PER_JOB))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="attempt") as pool:
        ran = run_attempts(run_id, attempt_ids, pool, threads)
    finish_run_if_done(run_id)
    return ran


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
            execute_attempts,
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
