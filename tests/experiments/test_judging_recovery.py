"""The evaluator recovers like the attempts: a verdict claim lapses with its claimer's lease,
and judging whose job was lost (or never queued) is queued again by the next sweep, once."""

import uuid
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from evaluation.evaluator import platform_org
from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus
from experiments.judging import QUEUED_WITHIN, enqueue_judging, judge_attempts
from experiments.models import Attempt, AttemptStatus, WorkerLease
from prbench.queues import get_queue
from prbench.recovery import run_recovery_sweep
from providers.models import ProviderCredential
from tests.conftest import api_client, make_api_key, work_queue
from tests.evaluation.test_evaluator import GOOD, openai_reply


@pytest.fixture
def mock_profile(db):
    return EvaluatorProfile.objects.create(
        name="mock-reviewer", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )


def answered_unjudged(experiment, start) -> tuple:
    """A judged run whose attempts were recorded, and whose judging was never queued: the test's
    transaction never commits, as if the worker died between recording and queuing."""
    run = start(experiment)
    work_queue()
    answered = list(run.attempts.filter(status=AttemptStatus.COMPLETED).values_list("pk", flat=True))
    assert answered and run.evaluator_profile_id is not None
    return run, answered


def answered_a_while_ago(attempt_ids: list[int]) -> None:
    """Longer ago than a worker takes to queue judging after recording."""
    past = QUEUED_WITHIN + timedelta(seconds=1)
    Attempt.objects.filter(pk__in=attempt_ids).update(scored_at=F("scored_at") - past)


def judged(attempt_ids: list[int]) -> int:
    return Verdict.objects.filter(attempt_id__in=attempt_ids, status=VerdictStatus.JUDGED).count()


def test_judging_never_queued_is_queued_by_one_sweep_and_only_once(mock_profile, experiment, start):
    _, answered = answered_unjudged(experiment, start)
    assert run_recovery_sweep()["unjudged"] == 0  # just recorded: its job may still be on its way

    answered_a_while_ago(answered)
    assert run_recovery_sweep()["unjudged"] == len(answered)
    assert run_recovery_sweep()["unjudged"] == 0  # its job is waiting: no second one
    work_queue()
    assert judged(answered) == len(answered)
    assert run_recovery_sweep()["unjudged"] == 0


def test_a_waiting_judging_job_is_left_alone_and_a_lost_one_replaced(mock_profile, experiment, start):
    _, answered = answered_unjudged(experiment, start)
    assert enqueue_judging(mock_profile.pk, answered)  # queued as recording does, behind a backlog
    answered_a_while_ago(answered)
    assert run_recovery_sweep()["unjudged"] == 0

    get_queue("judging").empty()  # Redis lost it
    assert run_recovery_sweep()["unjudged"] == len(answered)
    work_queue()
    assert judged(answered) == len(answered)


@pytest.fixture
def paid_judge(db, fake):
    """The evaluator on a real wire (the platform's OpenAI credential, at the local fake), whose
    every call ``fake.seen`` counts: what the platform pays for."""
    credential = ProviderCredential(org=platform_org(), provider="openai", base_url=fake.url + "/v1")
    credential.set_api_key("sk-platform-key-0002")
    credential.save()
    fake.default = openai_reply(GOOD)
    return EvaluatorProfile.objects.create(
        name="reviewer", provider="openai", model_name="gpt-4o", provider_config={"max_retries": 0}
    )


def lease(alive: bool) -> str:
    name, now = uuid.uuid4().hex, timezone.now()
    expires = now + timedelta(minutes=1) if alive else now - timedelta(seconds=1)
    WorkerLease.objects.create(name=name, hostname="judge-box", pid=1, started_at=now, expires_at=expires)
    return name


def test_a_verdict_held_by_a_dead_worker_is_judged_again_once(paid_judge, experiment, start, fake):
    _, answered = answered_unjudged(experiment, start)
    held, *others = answered
    for pk in others:  # judged already: only the held one is at stake here
        Verdict.objects.create(attempt_id=pk, profile=paid_judge, status=VerdictStatus.JUDGED, overall=70)
    claimer = lease(alive=True)  # a worker mid-judging, its lease renewed
    Verdict.objects.create(
        attempt_id=held, profile=paid_judge, claim_token=uuid.uuid4(), claimed_at=timezone.now(), claimed_by=claimer
    )
    answered_a_while_ago(answered)

    assert judge_attempts(paid_judge.pk, [held]) == 0 and not fake.seen  # a live claim is never taken
    assert run_recovery_sweep()["unjudged"] == 0

    WorkerLease.objects.filter(name=claimer).update(expires_at=timezone.now() - timedelta(seconds=1))  # it died
    assert run_recovery_sweep()["unjudged"] == 1  # at once, not ten minutes after its claim
    assert run_recovery_sweep()["unjudged"] == 0
    work_queue()
    assert judged([held]) == 1 and len(fake.seen) == 1  # judged, and paid, once
    assert judge_attempts(paid_judge.pk, [held]) == 0 and run_recovery_sweep()["unjudged"] == 0
    assert len(fake.seen) == 1


def test_the_api_run_says_judging_is_in_progress(mock_profile, org, experiment, start):
    run, answered = answered_unjudged(experiment, start)
    client = api_client(make_api_key(org, ["read"]))

    body = client.get(f"/api/runs/{run.code}").json()
    assert body["status"] == "completed"
    assert body["progress"]["judging"] == {"judged": 0, "answered": len(answered), "finished": False}

    answered_a_while_ago(answered)
    run_recovery_sweep()
    work_queue()
    body = client.get(f"/api/runs/{run.code}").json()
    assert body["progress"]["judging"] == {"judged": len(answered), "answered": len(answered), "finished": True}
