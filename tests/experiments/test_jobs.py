"""Runs executed by a real RQ SimpleWorker against the test Redis and Postgres."""

import uuid

from experiments.actions import (
    ArmSpec,
    do_cancel_run,
    do_pause_run,
    do_replace_arms,
    do_resume_run,
)
from experiments.attempt_queue import enqueue_attempts, run_has_jobs
from experiments.models import Artifact, ArtifactKind, Attempt, AttemptStatus, RunStatus
from experiments.pipeline import arm_spec, claim_attempt, claim_attempts, execute, record_failure, record_outcomes
from experiments.prompts import build_request
from prbench.recovery import run_recovery_sweep
from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from tests.conftest import as_if_its_worker_died, work_queue


def test_a_run_executes_every_attempt_and_completes(experiment, start):
    run = start(experiment)
    assert run.total_attempts == 8 and run.attempts.filter(status=AttemptStatus.QUEUED).count() == 8
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.finished_at
    attempts = run.attempts.all()
    assert all(a.status == AttemptStatus.COMPLETED for a in attempts)
    assert all(a.queued_at <= a.started_at <= a.responded_at <= a.validated_at <= a.scored_at for a in attempts)
    oracle = attempts.filter(arm__label="oracle")
    assert oracle.filter(resolved=True, patch_applied=True).count() == 4
    assert Artifact.objects.filter(attempt__run=run, kind=ArtifactKind.VALIDATION, status="passed").count() >= 4
    assert Artifact.objects.filter(attempt__run=run, kind=ArtifactKind.VALIDATION).count() == 8
    # The patch is kept once, as the attempt's answer: no artifact repeats it.
    assert all(a.extracted_answer.startswith("diff --git") for a in oracle)
    assert not Artifact.objects.filter(attempt__run=run, kind=ArtifactKind.PATCH).exists()
    assert all(a.claims == 1 and a.input_tokens and a.cost_usd is not None for a in attempts)
    assert "reference_output" not in attempts[0].request


def test_running_the_jobs_twice_counts_nothing_twice(experiment, start):
    run = start(experiment, inference_only=True)
    ids = list(run.attempts.values_list("pk", flat=True))
    enqueue_attempts(run.pk, ids)  # a duplicate delivery of every job
    work_queue()
    assert run.attempts.filter(status=AttemptStatus.COMPLETED, claims=1).count() == 8
    # Inference-only: nothing validated, so no artifact at all (the run says it was not validated).
    assert not Artifact.objects.filter(attempt__run=run).exists()


def test_a_failing_arm_fails_its_attempts_not_the_run(experiment, start):
    do_replace_arms(
        experiment,
        [
            ArmSpec("good", "mock", "m", {"mode": "oracle"}),
            ArmSpec(
                "down",
                "mock",
                "m",
                {"mode": "error", "failure_category": "overloaded", "max_retries": 1, "retry_base_ms": 1},
            ),
        ],
    )
    run = start(experiment, inference_only=True)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    down = run.attempts.filter(arm__label="down")
    assert down.count() == 4
    assert set(down.values_list("status", "error_category", "retries")) == {
        (AttemptStatus.FAILED, ErrorCategory.OVERLOADED, 1)
    }
    assert run.attempts.filter(arm__label="good", status=AttemptStatus.COMPLETED).count() == 4


def test_a_run_where_nothing_answers_fails(experiment, start):
    do_replace_arms(experiment, [ArmSpec("down", "mock", "m", {"mode": "error", "failure_category": "authentication"})])
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_pause_holds_queued_work_and_resume_finishes_it(experiment, start, django_capture_on_commit_callbacks):
    run = start(experiment, inference_only=True)
    assert do_pause_run(run)
    work_queue()
    assert run.attempts.filter(status=AttemptStatus.QUEUED).count() == 8
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED
    with django_capture_on_commit_callbacks(execute=True):
        assert do_resume_run(run)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(status=AttemptStatus.COMPLETED, claims=1).count() == 8


def test_cancel_stops_queued_attempts(experiment, start):
    run = start(experiment)
    assert do_cancel_run(run)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.attempts.filter(status=AttemptStatus.CANCELLED).count() == 8
    assert not do_cancel_run(run)


def test_an_abandoned_attempt_is_reclaimed_and_counted_once(experiment, start):
    run = start(experiment, inference_only=True)
    victim = run.attempts.order_by("sequence").first()
    old_token = claim_attempt(victim.pk)  # a worker claimed it, then died
    as_if_its_worker_died(victim.pk)
    work_queue()  # everything else finishes; the victim is stuck in running
    victim.refresh_from_db()
    run.refresh_from_db()
    assert victim.status == AttemptStatus.RUNNING and run.status == RunStatus.RUNNING

    report = run_recovery_sweep(stale_after_seconds=60)
    assert report["reclaimed"] == 1 and report["jobs"] == 1
    work_queue()
    victim.refresh_from_db()
    run.refresh_from_db()
    assert victim.status == AttemptStatus.COMPLETED and victim.claims == 2
    assert run.status == RunStatus.COMPLETED
    assert victim.extracted_answer.startswith("diff --git")
    # The dead worker's late result is refused: its token no longer holds.
    error = ProviderError(ErrorCategory.TIMEOUT, "late")
    assert not record_failure(victim.pk, old_token, build_request(victim), error)
    victim.refresh_from_db()
    assert victim.status == AttemptStatus.COMPLETED


def test_a_lost_queue_is_rebuilt_from_postgres(experiment, start, clean_redis):
    run = start(experiment, inference_only=True)
    assert run_has_jobs(run.pk)
    clean_redis.flushdb()  # Redis restarted without persistence
    assert not run_has_jobs(run.pk)
    report = run_recovery_sweep()
    assert report["requeued_runs"] == 1 and report["reclaimed"] == 0
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(status=AttemptStatus.COMPLETED, claims=1).count() == 8


def test_requeue_leaves_healthy_runs_alone(experiment, start):
    run = start(experiment, inference_only=True)
    report = run_recovery_sweep()
    assert (report["reclaimed"], report["requeued_runs"], report["jobs"]) == (0, 0, 0)
    assert uuid.UUID(str(run.code))


def test_a_batch_is_recorded_only_where_its_claim_still_holds(experiment, start):
    run = start(experiment, inference_only=True)
    ids = list(run.attempts.order_by("sequence").values_list("pk", flat=True)[:3])
    token, attempts = claim_attempts(ids)
    assert [a.pk for a in attempts] == ids and claim_attempts(ids)[1] == []  # claimed once, in one go
    outcomes = [execute(a, gateway.prepare(run.org_id, arm_spec(a))) for a in attempts]
    # The second attempt looked abandoned and was re-queued meanwhile: its result is not ours.
    Attempt.objects.filter(pk=ids[1]).update(status=AttemptStatus.QUEUED, claim_token=None)
    assert record_outcomes(token, outcomes) == 2
    statuses = dict(Attempt.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {ids[0]: AttemptStatus.COMPLETED, ids[1]: AttemptStatus.QUEUED, ids[2]: AttemptStatus.COMPLETED}
    answered = Attempt.objects.filter(pk__in=ids).exclude(extracted_answer="")
    assert set(answered.values_list("pk", flat=True)) == {ids[0], ids[2]}
    recorded = Attempt.objects.get(pk=ids[0])
    # Written through each field's own preparation: JSON, decimals and times round-trip.
    assert recorded.request["messages"][0]["role"] == "user" and recorded.raw_response["mode"] == "oracle"
    assert recorded.responded_at >= recorded.started_at and recorded.output.startswith("Here is a patch")
