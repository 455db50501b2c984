"""Liveness, not age: the sweep takes back the attempts of a dead worker, never a live one's,
and queues only what it took back; RQ's own cleanup leaves a long live job alone."""

import threading
from datetime import timedelta

from django.utils import timezone
from rq.registry import FailedJobRegistry, StartedJobRegistry

from experiments import liveness
from experiments.actions import ArmSpec, do_replace_arms
from experiments.models import Attempt, AttemptStatus, RunStatus, WorkerLease
from experiments.pipeline import claim_attempts
from prbench.queues import RECOVERY_QUEUE, get_queue
from prbench.recovery import run_recovery_sweep
from tests.conftest import as_if_its_worker_died, work_queue


def test_a_live_workers_attempt_is_never_reclaimed_however_long_it_runs(experiment, start):
    run = start(experiment, inference_only=True)
    victim = run.attempts.order_by("sequence").first()
    token, claimed = claim_attempts([victim.pk])
    assert claimed
    Attempt.objects.filter(pk=victim.pk).update(started_at=timezone.now() - timedelta(hours=5))
    assert liveness.heartbeat().renew_now()

    report = run_recovery_sweep(stale_after_seconds=60)
    victim.refresh_from_db()
    assert report["reclaimed"] == 0
    assert (victim.status, victim.claim_token) == (AttemptStatus.RUNNING, token)
    lease = WorkerLease.objects.get(name=victim.claimed_by)
    assert lease.expires_at > timezone.now()


def test_a_dead_workers_attempts_are_reclaimed_and_only_they_are_queued(experiment, start):
    run = start(experiment, inference_only=True)
    queue = get_queue()
    jobs_before = set(queue.get_job_ids())
    assert jobs_before  # the run's own jobs are still waiting: they cover its other attempts
    first, second, alive = run.attempts.order_by("sequence")[:3]
    claim_attempts([first.pk, second.pk, alive.pk])
    as_if_its_worker_died(first.pk, second.pk)
    dead_lease = Attempt.objects.get(pk=first.pk).claimed_by
    assert liveness.heartbeat().renew_now()  # a flush by an earlier test may have emptied the table

    report = run_recovery_sweep()
    assert (report["reclaimed"], report["jobs"], report["requeued_runs"]) == (2, 1, 0)
    recovery = get_queue(RECOVERY_QUEUE)  # where recovered work goes, ahead of the rest
    assert set(queue.get_job_ids()) == jobs_before
    assert [job.args for job in recovery.get_jobs()] == [(run.pk, [first.pk, second.pk])]
    statuses = dict(run.attempts.filter(pk__in=[first.pk, second.pk, alive.pk]).values_list("pk", "status"))
    assert statuses == {first.pk: "queued", second.pk: "queued", alive.pk: "running"}
    assert not Attempt.objects.filter(pk__in=[first.pk, second.pk]).exclude(claimed_by="").exists()
    assert not WorkerLease.objects.filter(name=dead_lease).exists()  # the sweep clears lapsed leases
    assert WorkerLease.objects.filter(name=liveness.heartbeat().name).exists()


def test_attempts_claimed_before_leases_keep_the_age_rule(experiment, start):
    run = start(experiment, inference_only=True)
    old, recent = run.attempts.order_by("sequence")[:2]
    claim_attempts([old.pk, recent.pk])
    Attempt.objects.filter(pk__in=[old.pk, recent.pk]).update(claimed_by="")
    Attempt.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(minutes=20))

    assert run_recovery_sweep(stale_after_seconds=600)["reclaimed"] == 1
    assert dict(run.attempts.filter(pk__in=[old.pk, recent.pk]).values_list("pk", "status")) == {
        old.pk: "queued",
        recent.pk: "running",
    }


def test_rq_cleanup_leaves_a_long_running_live_job_alone(experiment, start, settings):
    # A lease of 1 s makes RQ's record of the running job live 2 s without a heartbeat; the
    # job takes about 4 s, and another worker's registry cleanup runs all the while.
    settings.PRBENCH_WORKER_LEASE_SECONDS = 1
    assert liveness.heartbeat().renew_now()  # the thread picks up the short interval
    do_replace_arms(experiment, [ArmSpec("slow", "mock", "m", {"mode": "oracle", "latency_ms": 4000})])
    experiment.sample_size = 1
    experiment.save()
    run = start(experiment, inference_only=True)
    queue = get_queue()
    started = StartedJobRegistry(queue=queue)
    seen_running: list[float] = []
    finished = threading.Event()

    def other_workers_cleanup() -> None:
        began = None
        while not finished.wait(0.2):
            started.cleanup()  # what every RQ worker runs as maintenance
            if started.get_job_ids(cleanup=False):
                began = began or timezone.now()
                seen_running.append((timezone.now() - began).total_seconds())

    cleaner = threading.Thread(target=other_workers_cleanup)
    cleaner.start()
    try:
        work_queue()
    finally:
        finished.set()
        cleaner.join()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert max(seen_running) > 2 * settings.PRBENCH_WORKER_LEASE_SECONDS  # cleaned past its TTL
    assert FailedJobRegistry(queue=queue).get_job_ids() == []  # and never taken for abandoned
