"""Defects a review found: each test fails without its fix."""

import threading
import time
from dataclasses import replace

import pytest
from django.db import connections, transaction

from experiments.actions import do_cancel_run, do_start_run
from experiments.attempt_queue import run_has_jobs
from experiments.models import Attempt, AttemptStatus, RunStatus
from experiments.pipeline import claim_attempt
from prbench.recovery import run_recovery_sweep
from providers.errors import ErrorCategory
from tests.conftest import as_if_its_worker_died, work_queue


@pytest.mark.django_db(transaction=True)
def test_two_workers_cannot_claim_the_same_attempt(experiment):
    run = do_start_run(experiment, inference_only=True)
    attempt_id = run.attempts.order_by("sequence").first().pk
    claimed, results = threading.Event(), {}

    def first_worker():
        try:
            with transaction.atomic():
                results["a"] = claim_attempt(attempt_id)
                claimed.set()
                threading.Event().wait(0.5)  # hold the row lock while the other worker tries
        finally:
            connections.close_all()

    def second_worker():
        try:
            claimed.wait(5)
            results["b"] = claim_attempt(attempt_id)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=first_worker), threading.Thread(target=second_worker)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results["a"] is not None and results["b"] is None
    assert Attempt.objects.get(pk=attempt_id).claims == 1


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_start_enqueues_nothing(experiment):
    with pytest.raises(RuntimeError), transaction.atomic():
        run = do_start_run(experiment)
        raise RuntimeError("the request failed after starting the run")
    assert not run_has_jobs(run.pk)


def test_a_crash_outside_the_provider_call_fails_only_that_attempt(
    experiment, dataset, django_capture_on_commit_callbacks
):
    broken = dataset.tasks.order_by("position").first()
    broken.test_command = ["/nonexistent/test-runner"]
    broken.save()
    experiment.sample_size = None
    experiment.save()
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    crashed = run.attempts.filter(task=broken)
    assert set(crashed.values_list("status", "error_category")) == {
        (AttemptStatus.FAILED, ErrorCategory.PLATFORM_ERROR)
    }
    assert "FileNotFoundError" in crashed.first().error_message
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == run.total_attempts - crashed.count()


def test_requeue_closes_abandoned_attempts_of_cancelled_runs(experiment, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, inference_only=True)
    victim = run.attempts.order_by("sequence").first()
    claim_attempt(victim.pk)
    as_if_its_worker_died(victim.pk)
    do_cancel_run(run)
    run_recovery_sweep(stale_after_seconds=60)
    assert not run.attempts.exclude(status=AttemptStatus.CANCELLED).exists()


@pytest.mark.django_db(transaction=True)
def test_pausing_a_run_mid_job_lets_the_job_finish_what_it_started(experiment, settings):
    from experiments.actions import ArmSpec, do_pause_run, do_replace_arms, do_resume_run
    from experiments.jobs import execute_attempts

    settings.PRBENCH_THREADS_PER_JOB = 4
    do_replace_arms(experiment, [ArmSpec("slow", "mock", "m", {"mode": "oracle", "latency_ms": 400})])
    experiment.repetitions = 2  # 8 attempts: 4 in flight, 4 still queued when the run pauses
    experiment.save()
    run = do_start_run(experiment, inference_only=True)
    ids = list(run.attempts.order_by("sequence").values_list("pk", flat=True))
    job = threading.Thread(target=lambda: (execute_attempts(run.pk, ids[:2]), connections.close_all()))
    job.start()
    try:
        assert _eventually(lambda: run.attempts.filter(status=AttemptStatus.RUNNING).count() == 4)
        assert do_pause_run(run)
        job.join(5)  # as calls finish, threads free up while queued attempts cannot be claimed
        assert not job.is_alive(), "the job kept trying to claim from a paused run"
        assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == 4  # what it started, it recorded
        assert run.attempts.filter(status=AttemptStatus.QUEUED).count() == 4
    finally:
        if job.is_alive():
            do_resume_run(run)
            job.join(10)


@pytest.mark.django_db(transaction=True)
def test_a_job_that_fails_returns_its_attempts_and_slots(experiment, settings, monkeypatch):
    from django.db import OperationalError

    from experiments import pipeline
    from experiments.jobs import execute_attempts
    from providers import limits

    settings.PRBENCH_THREADS_PER_JOB = 8
    settings.PRBENCH_DATABASE_RETRY_SECONDS = 0  # gone for good: the job fails at once
    run = do_start_run(experiment, inference_only=True)
    ids = list(run.attempts.values_list("pk", flat=True))

    def database_gone(token, outcomes):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(pipeline, "record_outcomes", database_gone)
    with pytest.raises(OperationalError):
        execute_attempts(run.pk, ids)
    # Back in the queue at once, not left running for requeue_stale, and no slot kept.
    assert set(run.attempts.values_list("status", "claim_token")) == {(AttemptStatus.QUEUED, None)}
    for arm in run.arms.all():
        assert limits.get_connection().zcard(limits.slots_key(f"run-arm:{arm.pk}")) == 0


def test_an_answer_the_database_cannot_store_fails_only_that_attempt(experiment, start, monkeypatch):
    from providers.adapters.mock.adapter import MockAdapter

    generate = MockAdapter.generate

    def nul_from_the_noisy_arm(self, request):
        completion = generate(self, request)
        if self.arm.model_name != "mock-noisy":
            return completion
        return replace(completion, text=completion.text + "\x00")  # Postgres text cannot hold NUL

    monkeypatch.setattr(MockAdapter, "generate", nul_from_the_noisy_arm)
    run = start(experiment, inference_only=True)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    failed = run.attempts.filter(status=AttemptStatus.FAILED)
    assert set(failed.values_list("arm__label", "error_category")) == {("noisy", ErrorCategory.PLATFORM_ERROR)}
    assert failed.count() == 4 and "DataError" in failed.first().error_message
    assert run.attempts.filter(status=AttemptStatus.COMPLETED, arm__label="oracle").count() == 4


def test_a_held_slot_is_given_back_before_the_patch_is_validated(experiment, start, monkeypatch):
    from experiments import pipeline
    from experiments.actions import ArmSpec, do_replace_arms
    from providers import limits

    do_replace_arms(experiment, [ArmSpec("one-at-a-time", "mock", "m", {"mode": "oracle", "max_concurrency": 1})])
    validate, slot_keys, slots_during_validation = pipeline.validate_task, [], []

    def watching(task, patch):  # on a pool thread: Redis only, no database
        slots_during_validation.append(limits.get_connection().zcard(slot_keys[0]))
        return validate(task, patch)

    monkeypatch.setattr(pipeline, "validate_task", watching)
    experiment.sample_size = 1  # one attempt: no other call can take the slot meanwhile
    experiment.save()
    run = start(experiment)
    slot_keys.append(limits.slots_key(f"run-arm:{run.arms.get().pk}"))
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.total_attempts == 1
    assert slots_during_validation == [0]


def _eventually(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
