"""backfill_evaluations: judges what a profile has not judged yet, in chunks, never twice."""

import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError
from django.utils import timezone

from evaluation.evaluator import claim_verdicts
from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus
from experiments.judging import RUNS
from experiments.models import AttemptStatus, WorkerLease
from tests.cli import assert_clean_refusal, run_command, run_manage
from tests.conftest import work_queue


@pytest.fixture
def unjudged_run(experiment, start):
    """A run from before any evaluator profile existed: nothing judged it."""
    run = start(experiment)
    work_queue()
    assert run.evaluator_profile is None and not Verdict.objects.exists()
    return run


@pytest.fixture
def profile(db):
    return EvaluatorProfile.objects.create(
        name="late", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )


def answered(run):
    return run.attempts.filter(status=AttemptStatus.COMPLETED)


def test_dry_run_counts_and_judges_nothing(unjudged_run, profile):
    output = run_command("backfill_evaluations", "--profile", "late", "--dry-run")
    assert f"{answered(unjudged_run).count()} attempt(s) to judge with late:v1 (mock)" in output
    assert "estimated cost unknown (no catalog price for this model)" in output
    assert not Verdict.objects.exists()


def test_dry_run_prices_a_catalogued_model(unjudged_run):
    EvaluatorProfile.objects.create(name="gpt", provider="openai", model_name="gpt-4o")
    output = run_command("backfill_evaluations", "--profile", "gpt:1", "--dry-run", "--limit", "2")
    assert "2 attempt(s) to judge with gpt:v1; estimated cost about $0.00" in output


def test_backfill_in_pieces_never_judges_twice(unjudged_run, profile):
    total = answered(unjudged_run).count()
    assert "Judged 3 attempt(s)" in run_command("backfill_evaluations", "--profile", "late", "--limit", "3")
    assert "Judged" in run_command("backfill_evaluations", "--profile", "late", "--run", str(unjudged_run.code))
    assert "Judged 0 attempt(s)" in run_command("backfill_evaluations", "--profile", "late")
    verdicts = Verdict.objects.filter(profile=profile)
    assert verdicts.count() == total
    assert set(verdicts.values_list("status", flat=True)) == {VerdictStatus.JUDGED}


def test_an_interrupted_backfill_is_picked_up_once_its_claimers_lease_lapses(unjudged_run, profile):
    ids = list(answered(unjudged_run).values_list("pk", flat=True))
    claim_verdicts(profile.pk, ids[:2], RUNS)  # a backfill killed after claiming, before judging
    output = run_command("backfill_evaluations", "--profile", "late")
    assert f"Judged {len(ids) - 2} attempt(s)" in output and "2 were being judged by another job" in output
    # Its process is gone: its lease ran out (the claim's age does not matter).
    Verdict.objects.filter(status=VerdictStatus.PENDING).update(claimed_by=lapsed_lease())
    assert "Judged 2 attempt(s)" in run_command("backfill_evaluations", "--profile", "late")
    assert Verdict.objects.filter(profile=profile, status=VerdictStatus.JUDGED).count() == len(ids)


def test_a_claim_from_before_leases_is_picked_up_once_stale(unjudged_run, profile):
    ids = list(answered(unjudged_run).values_list("pk", flat=True))
    claim_verdicts(profile.pk, ids[:1], RUNS)
    Verdict.objects.filter(status=VerdictStatus.PENDING).update(claimed_by="")  # no claimer recorded
    output = run_command("backfill_evaluations", "--profile", "late")
    assert f"Judged {len(ids) - 1} attempt(s)" in output and "1 were being judged by another job" in output
    Verdict.objects.filter(status=VerdictStatus.PENDING).update(claimed_at=timezone.now() - timedelta(hours=1))
    assert "Judged 1 attempt(s)" in run_command("backfill_evaluations", "--profile", "late")


def lapsed_lease() -> str:
    """The name of a process's lease that ran out a minute ago."""
    name, lapsed = uuid.uuid4().hex, timezone.now() - timedelta(minutes=1)
    WorkerLease.objects.create(name=name, hostname="gone", pid=1, started_at=lapsed, expires_at=lapsed)
    return name


def test_since_leaves_older_attempts_alone(unjudged_run, profile):
    tomorrow = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%d")
    assert "0 attempt(s)" in run_command("backfill_evaluations", "--profile", "late", "--since", tomorrow, "--dry-run")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--profile", "nobody"], "--profile nobody: no evaluator profile of that name and version"),
        (["--profile", "late:x"], "--profile late:x: the version must be a number"),
        (["--profile", "late", "--since", "yesterday"], "--since yesterday: expected a date as YYYY-MM-DD"),
        (["--profile", "late", "--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_bad_arguments_are_named(profile, args, message):
    with pytest.raises(CommandError, match=message.replace("$", "\\$")):
        run_command("backfill_evaluations", *args)


def test_requeue_stale_judges_what_a_lost_evaluator_job_left(experiment, start, profile):
    """Attempts recorded, their judging job lost (here: never queued, as after a Redis restart)."""
    from prbench.recovery import run_recovery_sweep

    run = start(experiment)  # the profile is active: the run records it
    work_queue()  # outside a commit-capturing block, so the judging jobs are never queued
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).exists() and not Verdict.objects.exists()
    ids = list(answered(run).values_list("pk", flat=True))
    assert run_recovery_sweep(stale_after_seconds=600)["unjudged"] == 0  # too recent: their job may still come
    answered(run).update(scored_at=timezone.now() - timedelta(hours=1))
    claim_verdicts(profile.pk, ids[:1], RUNS)  # one is being judged right now by a live job
    assert run_recovery_sweep(stale_after_seconds=600)["unjudged"] == len(ids) - 1
    work_queue()
    assert Verdict.objects.filter(status=VerdictStatus.JUDGED).count() == len(ids) - 1
    assert run_recovery_sweep(stale_after_seconds=600)["unjudged"] == 0


@pytest.mark.parametrize("run", ["bad", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_run_is_named(profile, run):
    with pytest.raises(CommandError) as excinfo:
        run_command("backfill_evaluations", "--profile", "late", "--run", run)
    assert str(excinfo.value) == f"no run with id {run!r}"
    assert not Verdict.objects.exists()


def test_an_unknown_run_is_a_clean_error_on_the_command_line(transactional_db):
    EvaluatorProfile.objects.create(name="late", provider="mock", model_name="mock-evaluator")

    result = run_manage("backfill_evaluations", "--profile", "late", "--run", "bad")

    assert_clean_refusal(result, "no run with id 'bad'")
