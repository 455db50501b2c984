"""Recovered work goes first: attempts the sweep took back from a dead worker are run before
the evaluator's backlog, by a real worker listening to every queue (settings.WORKER_QUEUES)."""

import uuid

import pytest
from django.utils import timezone

from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus
from experiments.judging import enqueue_judging
from experiments.models import AttemptStatus, RunStatus
from experiments.recovery import requeue_abandoned_attempts
from experiments.worker import AttemptWorker
from prbench.queues import get_connection, get_queue, work_queues, worker_queues
from prbench.recovery import run_recovery_sweep
from tests.conftest import as_if_its_worker_died, work_queue


@pytest.fixture
def mock_profile(db):
    return EvaluatorProfile.objects.create(
        name="mock-reviewer", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )


def killed_mid_run(run) -> list[int]:
    """The run's jobs were taken by a worker that claimed every attempt and died."""
    for queue in work_queues():
        queue.empty()
    ids = list(run.attempts.values_list("pk", flat=True))
    run.attempts.update(status=AttemptStatus.RUNNING, claim_token=uuid.uuid4(), started_at=timezone.now())
    as_if_its_worker_died(*ids)
    return ids


def test_a_reclaimed_attempt_runs_before_the_judging_backlog(mock_profile, experiment, start):
    judged = start(experiment)  # answered; its judging is queued below, as a backlog
    work_queue()  # (the test's transaction never commits: no judging queued by recording)
    answered = list(judged.attempts.filter(status=AttemptStatus.COMPLETED).values_list("pk", flat=True))
    assert answered

    crashed = start(experiment, inference_only=True)
    stuck = killed_mid_run(crashed)
    for pk in answered:  # one job each: a backlog the evaluator works through
        assert enqueue_judging(mock_profile.pk, [pk])
    assert requeue_abandoned_attempts(timezone.timedelta(minutes=10))["reclaimed"] == len(stuck)

    # The first job a worker takes is the recovered one: the run finishes, nothing is judged yet.
    AttemptWorker(worker_queues(), connection=get_connection()).work(burst=True, max_jobs=1)
    crashed.refresh_from_db()
    assert crashed.status == RunStatus.COMPLETED
    assert crashed.attempts.filter(status=AttemptStatus.COMPLETED).count() == len(stuck)
    assert not Verdict.objects.exclude(status=VerdictStatus.PENDING).exists()
    assert get_queue("judging").count == len(answered)

    work_queue()  # then the backlog
    judged_now = Verdict.objects.filter(attempt_id__in=answered, status=VerdictStatus.JUDGED)
    assert judged_now.count() == len(answered)
    assert run_recovery_sweep()["jobs"] == 0  # nothing left behind
