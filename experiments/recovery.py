"""The experiments app's steps of the recovery sweep (prbench/recovery.py, which runs them in
the order ``PRBENCH_RECOVERY_STEPS`` gives): attempts a dead worker held, jobs lost with Redis,
judging lost with its job (leaderboards/recovery.py brings boards up to date)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, CharField, Exists, OuterRef, Q, Value, When
from django.db.models.functions import Now
from django.utils import timezone

from datasets.environments import live_capabilities, serves
from experiments.attempt_queue import EXECUTE_ATTEMPTS, attempt_needs, enqueue_attempts, run_has_jobs
from experiments.judging import enqueue_judging, unjudged_of_runs
from experiments.models import RUN_FINISHED, Attempt, AttemptStatus, Run, RunStatus, WorkerLease
from experiments.pipeline import finish_run_if_done
from prbench.queues import get_queue, needs_queues


def requeue_abandoned_attempts(stale_after: timedelta) -> dict[str, int]:
    """Recover from crashed workers and lost queues using Postgres as the source of truth.

    A running attempt whose claiming process's lease ran out goes back to queued (its old
    claim token no longer matches, so a late result from the old worker is discarded), and
    only those attempts get new jobs. An attempt of a live process is left alone however
    long it runs. Attempts claimed before leases existed (no claimer recorded) fall back to
    ``stale_after``. Every running run whose queued attempts have no job in Redis gets fresh
    jobs.

    Counts: ``reclaimed``, running attempts whose worker vanished; ``requeued_runs``, runs
    whose queued attempts had no job left in Redis; ``jobs``, jobs enqueued.
    """
    report = {"reclaimed": 0, "requeued_runs": 0, "jobs": 0}
    report["reclaimed"], reclaimed = _reclaim_abandoned(stale_after)
    for run in Run.objects.filter(status=RunStatus.RUNNING):
        queued = list(
            run.attempts.filter(status=AttemptStatus.QUEUED).order_by("sequence").values_list("pk", flat=True)
        )
        if queued and not run_has_jobs(run.pk):
            report["jobs"] += enqueue_attempts(run.pk, queued, recovered=True)
            report["requeued_runs"] += 1
        elif run.pk in reclaimed:
            # Other jobs of the run are queued or running: they take its other queued
            # attempts. Queueing those again too would only make duplicate jobs.
            report["jobs"] += enqueue_attempts(run.pk, reclaimed[run.pk], recovered=True)
        elif not queued:
            finish_run_if_done(run.pk)
    WorkerLease.objects.filter(expires_at__lt=Now()).delete()
    return report


def reroute_stranded_jobs(stale_after: timedelta) -> dict[str, int]:
    """Jobs left on a needs queue that no longer fits their attempts go where they now belong.

    A job on ``default`` whose task gained a recipe is handed back by the worker that takes it
    (experiments/pipeline.py); one on ``env:python3.4`` whose recipe has since moved to Python
    3.11 would wait for ever, for a worker nobody will start. Only queues no live worker
    serves are read (a query per job), so the sweep costs nothing while work flows. Each such job is taken off its
    queue and its attempts still queued are queued again by what they need now; a worker that
    took the job meanwhile finds them claimed, and runs nothing twice.

    Counts: ``rerouted``, jobs moved."""
    moved = 0
    live = live_capabilities()
    for name, needs in needs_queues().items():
        if any(serves(has, needs) for has in live):
            continue  # a worker takes its jobs, and hands back what it cannot run: no scan
        queue = get_queue(name)
        for job in queue.get_jobs():
            if job.func_name != EXECUTE_ATTEMPTS or len(job.args) != 2:
                continue
            run_id, attempt_ids = job.args
            queued = list(
                Attempt.objects.filter(pk__in=attempt_ids, status=AttemptStatus.QUEUED)
                .order_by("sequence")
                .values_list("pk", flat=True)
            )
            current = attempt_needs(queued)
            if queued and all(current.get(pk, ()) == tuple(needs) for pk in queued):
                continue  # where it belongs
            queue.remove(job)
            if queued:
                enqueue_attempts(run_id, queued, recovered=True)
            moved += 1
    return {"rerouted": moved}


def requeue_unjudged(stale_after: timedelta) -> dict[str, int]:
    """``unjudged``: answered attempts whose evaluator job was lost, queued for judging again."""
    unjudged = 0
    for profile_id, attempt_ids in unjudged_of_runs(stale_after).items():
        for start in range(0, len(attempt_ids), settings.PRBENCH_ATTEMPTS_PER_JOB):
            chunk = attempt_ids[start : start + settings.PRBENCH_ATTEMPTS_PER_JOB]
            unjudged += len(chunk) if enqueue_judging(profile_id, chunk, once=True) else 0
    return {"unjudged": unjudged}


def _reclaim_abandoned(stale_after: timedelta) -> tuple[int, dict[int, list[int]]]:
    """Take back running attempts whose claimer is gone, in one UPDATE; returns how many,
    and the ids of those now queued again, by run. In a finished (cancelled) run nobody would pick them up
    again: they are closed instead."""
    now = timezone.now()
    alive = WorkerLease.objects.filter(name=OuterRef("claimed_by"), expires_at__gt=Now())  # the database's clock
    abandoned = Attempt.objects.filter(status=AttemptStatus.RUNNING).filter(
        (~Q(claimed_by="") & ~Exists(alive)) | Q(claimed_by="", started_at__lt=now - stale_after)
    )
    with transaction.atomic():
        # Locked, skipping rows a worker is recording right now: those are not abandoned.
        locked = abandoned.select_for_update(skip_locked=True, of=("self",)).order_by("sequence")
        rows = list(locked.values_list("pk", "run_id", "run__status"))
        run_finished = Exists(Run.objects.filter(pk=OuterRef("run_id"), status__in=RUN_FINISHED))
        status = Case(
            When(run_finished, then=Value(AttemptStatus.CANCELLED)),
            default=Value(AttemptStatus.QUEUED),
            output_field=CharField(),
        )
        Attempt.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(status=status, claim_token=None, claimed_by="")
    by_run: dict[int, list[int]] = {}
    for pk, run_id, run_status in rows:
        if run_status not in RUN_FINISHED:
            by_run.setdefault(run_id, []).append(pk)
    return len(rows), by_run
