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
from django.db.models import Count
from rq.queue import Queue
from rq.registry import StartedJobRegistry

from datasets.environments import live_capabilities, needs_of_recipe_row, needs_of_rows, waiting_for, with_recipe_needs
from datasets.models import EnvironmentRecipe
from experiments.models import Attempt, AttemptStatus, Run
from prbench.queues import RECOVERY_QUEUE, get_queue, queue_for_needs, work_queues

EXECUTE_ATTEMPTS = "experiments.jobs.execute_attempts"


def _batches(items: Iterable[int], size: int) -> Iterable[list[int]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def job_prefix(run_id: int) -> str:
    return f"run-{run_id}-"


def attempt_needs(attempt_ids: Iterable[int]) -> dict[int, tuple[str, ...]]:
    """What each attempt's task needs of its worker (its recipe's interpreter and system
    packages; nothing for a task without one), by attempt id, in one query."""
    return needs_of_rows(Attempt.objects.filter(pk__in=list(attempt_ids)), task="task__")


def enqueue_attempts(run_id: int, attempt_ids: Iterable[int], recovered: bool = False) -> int:
    """Queue the attempts in batches (one RQ round trip per batch, not per attempt), each
    on the queue of the workers that have what its tasks need (prbench/queues.py): a task
    needing Python 3.9 waits for a worker with Python 3.9 rather than failing on another.

    ``recovered``: work the recovery sweep took back or rebuilt, which goes before every
    other: on the "recovery" queue, which workers take from before "default", or, when it
    needs something of its worker, at the front of its needs queue (only workers having that
    may run it, and they serve needs queues first)."""
    ordered = list(attempt_ids)
    needs = attempt_needs(ordered)
    groups: dict[tuple[str, ...], list[int]] = {}
    for pk in ordered:  # in the order given (the run's sequence), within each group
        groups.setdefault(needs.get(pk, ()), []).append(pk)
    return sum(
        _enqueue_batches(run_id, _queue_for(group_needs, recovered), ids, at_front=recovered and bool(group_needs))
        for group_needs, ids in groups.items()
    )


def _queue_for(needs: tuple[str, ...], recovered: bool) -> Queue:
    return get_queue(RECOVERY_QUEUE) if recovered and not needs else queue_for_needs(needs)


def _enqueue_batches(run_id: int, queue: Queue, attempt_ids: list[int], at_front: bool = False) -> int:
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
            at_front=at_front,
        )
        for batch in _batches(attempt_ids, settings.PRBENCH_ATTEMPTS_PER_JOB)
    ]
    if at_front:
        jobs.reverse()  # each is pushed to the front, so the last pushed is taken first
    if jobs:
        queue.enqueue_many(jobs)
    return len(jobs)


def run_has_jobs(run_id: int) -> bool:
    """Whether Redis still holds queued or executing work for this run, on any queue."""
    prefix = job_prefix(run_id)
    for queue in work_queues():
        started = StartedJobRegistry(queue=queue).get_job_ids()
        if any(job_id.startswith(prefix) for job_id in [*queue.get_job_ids(), *started]):
            return True
    return False


def queued_without_a_worker(run: Run) -> list[tuple[int, str]]:
    """How many of the run's queued attempts wait for what no live worker has, and for what
    in words ("Python 3.9"): their jobs sit on a queue nobody listens to."""
    if not EnvironmentRecipe.objects.filter(dataset_id=run.experiment.dataset_id).exists():
        return []  # nothing of this run needs anything: no need to look at its attempts
    queued = with_recipe_needs(run.attempts.filter(status=AttemptStatus.QUEUED), task="task__")
    groups = queued.values_list("recipe_python", "recipe_system_packages").annotate(count=Count("pk")).order_by()
    live = live_capabilities()
    found = [(count, waiting_for(needs_of_recipe_row(python, packages), live)) for python, packages, count in groups]
    return [(count, words) for count, words in found if words]
