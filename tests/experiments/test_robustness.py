"""Defects a review found: each test fails without its fix."""

import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, transaction
from django.utils import timezone

from experiments.actions import do_cancel_run, do_requeue_stale, do_start_run
from experiments.jobs import run_has_jobs
from experiments.models import Attempt, AttemptStatus, RunStatus
from experiments.pipeline import claim_attempt
from providers.errors import ErrorCategory
from tests.conftest import work_queue


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
            close_old_connections()

    def second_worker():
        try:
            claimed.wait(5)
            results["b"] = claim_attempt(attempt_id)
        finally:
            close_old_connections()

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
    assert set(crashed.values_list("status", "error_category")) == {(AttemptStatus.FAILED, ErrorCategory.UNKNOWN)}
    assert "FileNotFoundError" in crashed.first().error_message
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == run.total_attempts - crashed.count()


def test_requeue_closes_abandoned_attempts_of_cancelled_runs(experiment, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, inference_only=True)
    victim = run.attempts.order_by("sequence").first()
    claim_attempt(victim.pk)
    Attempt.objects.filter(pk=victim.pk).update(started_at=timezone.now() - timedelta(hours=1))
    do_cancel_run(run)
    do_requeue_stale(stale_after_seconds=60)
    assert not run.attempts.exclude(status=AttemptStatus.CANCELLED).exists()
