"""A run's counters row (experiments/run_counters.py) equals the GROUP BY over its attempts and
verdicts after every kind of change, whichever path makes it, two workers at once included."""

import sqlite3
from decimal import Decimal

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus
from experiments import run_counters
from experiments.actions import do_cancel_run, do_pause_run, do_resume_run
from experiments.budgets import budget_status, recorded_spend
from experiments.models import Attempt, AttemptStatus, RunCounters, RunStatus
from experiments.pipeline import _give_back_claim, claim_attempts
from experiments.progress import run_progress
from prbench.recovery import run_recovery_sweep
from providers.errors import ErrorCategory
from tests.conftest import api_client, as_if_its_worker_died, client_for, make_api_key, work_queue
from tests.experiments.test_worker_crash import spawn_worker, wait_until


def counters_of(run) -> dict[str, int]:
    row = RunCounters.objects.filter(run=run).values(*run_counters.COLUMNS).first()
    return row or dict.fromkeys(run_counters.COLUMNS, 0)


def assert_exact(run) -> None:
    truth = run_counters.counted([run.pk]).get(run.pk, dict.fromkeys(run_counters.COLUMNS, 0))
    assert counters_of(run) == truth
    progress = run_progress(run)
    assert (progress.queued, progress.running, progress.completed, progress.failed, progress.cancelled) == tuple(
        truth[status] for status in run_counters.STATUSES
    )
    assert (progress.repeat_calls, progress.judged) == (truth["repeat_calls"], truth["judged"])


def queued_ids(run, n: int) -> list[int]:
    return list(run.attempts.filter(status=AttemptStatus.QUEUED).order_by("sequence").values_list("pk", flat=True)[:n])


@pytest.fixture
def mock_profile(db):
    return EvaluatorProfile.objects.create(
        name="mock-reviewer", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )


def test_counters_follow_claims_give_backs_the_sweep_records_and_verdicts(
    mock_profile, experiment, start, django_capture_on_commit_callbacks
):
    run = start(experiment)
    assert counters_of(run)["queued"] == run.attempts.count() == 8  # the start's INSERT
    assert_exact(run)

    token, claimed = claim_attempts(queued_ids(run, 3))
    assert len(claimed) == 3 and counters_of(run)["running"] == 3
    assert_exact(run)

    assert _give_back_claim([a.pk for a in claimed], token) == 3
    assert counters_of(run)["running"] == 0
    assert_exact(run)

    _, claimed = claim_attempts(queued_ids(run, 2))
    as_if_its_worker_died(*(a.pk for a in claimed))
    assert run_recovery_sweep()["reclaimed"] == 2  # back in the queue
    assert_exact(run)

    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # records every attempt, then queues their judging
    work_queue()
    run.refresh_from_db()
    answered = run.attempts.filter(status=AttemptStatus.COMPLETED).count()
    assert run.status == RunStatus.COMPLETED and answered > 0
    assert counters_of(run)["judged"] == answered
    assert counters_of(run)["spent_usd"] > 0  # the mock arms are priced
    assert_exact(run)


def test_a_claim_past_the_limit_retires_and_repeat_calls_add_up(experiment, start):
    run = start(experiment)
    poison = queued_ids(run, 2)
    Attempt.objects.filter(pk__in=poison).update(claims=settings.PRBENCH_MAX_ATTEMPT_CLAIMS, repeat_calls=2)
    assert counters_of(run)["repeat_calls"] == 4
    _, claimed = claim_attempts(poison)
    assert claimed == [] and counters_of(run)["failed"] == 2  # retired in the claim's UPDATE
    assert_exact(run)


def test_spend_and_budget_refusals_add_up(experiment, start):
    run = start(experiment)
    paid, refused = queued_ids(run, 2)
    Attempt.objects.filter(pk=paid).update(status=AttemptStatus.COMPLETED, cost_usd=Decimal("0.01250000"))
    Attempt.objects.filter(pk=refused).update(status=AttemptStatus.FAILED, error_category=ErrorCategory.BUDGET_EXCEEDED)
    assert (counters_of(run)["spent_usd"], counters_of(run)["budget_refused"]) == (Decimal("0.0125"), 1)
    assert_exact(run)
    # The budget line and the gateway's spend read the counters: ones set apart from the
    # attempts show it.
    RunCounters.objects.filter(run=run).update(spent_usd=Decimal("0.5"), budget_refused=3)
    run.budget_usd = Decimal("1.00")
    status = budget_status(run)
    assert (status.run_spent, status.experiment_spent, status.not_made) == (Decimal("0.5"), Decimal("0.5"), 3)
    assert recorded_spend(run) == (Decimal("0.5"), Decimal("0.5"))


def test_pause_resume_and_cancel(experiment, start):
    run = start(experiment)
    claim_attempts(queued_ids(run, 1))
    assert do_pause_run(run) and do_resume_run(run)
    assert_exact(run)
    assert do_cancel_run(run)
    assert counters_of(run) == {**dict.fromkeys(run_counters.COLUMNS, 0), "cancelled": 7, "running": 1}
    assert_exact(run)


def test_verdicts_count_when_final_and_of_the_runs_profile(mock_profile, experiment, start):
    run = start(experiment)
    work_queue()
    Verdict.objects.filter(run=run).delete()
    assert counters_of(run)["judged"] == 0
    attempt = run.attempts.filter(status=AttemptStatus.COMPLETED).first()
    verdict = Verdict.objects.create(attempt=attempt, run=run, profile=mock_profile, status=VerdictStatus.PENDING)
    assert counters_of(run)["judged"] == 0
    Verdict.objects.filter(pk=verdict.pk).update(status=VerdictStatus.EVALUATOR_ERROR)
    assert counters_of(run)["judged"] == 1
    other = EvaluatorProfile.objects.create(name="replay", provider="mock", model_name="m")
    Verdict.objects.create(attempt=attempt, run=run, profile=other, status=VerdictStatus.JUDGED)
    assert counters_of(run)["judged"] == 1  # a replay with another profile is not the run's judging
    assert_exact(run)
    verdict.delete()
    assert counters_of(run)["judged"] == 0
    assert_exact(run)


def test_deleting_a_run_takes_its_counters_and_leaves_the_others(experiment, start):
    kept, deleted = start(experiment), start(experiment)
    kept.attempts.filter(pk=queued_ids(kept, 1)[0]).delete()
    assert counters_of(kept)["queued"] == 7
    deleted.delete()
    assert not RunCounters.objects.filter(run_id=deleted.pk).exists()
    assert_exact(kept)


def test_the_page_and_the_api_read_the_counters(experiment, start, org, alice):
    run = start(experiment)
    # Counters that disagree with the attempts show which one the pages read.
    RunCounters.objects.filter(run=run).update(queued=5, completed=3, repeat_calls=2)
    body = api_client(make_api_key(org, scopes=("read",))).get(f"/api/runs/{run.code}").json()
    assert (body["progress"]["total"], body["progress"]["completed"], body["repeat_calls"]) == (8, 3, 2)
    page = client_for(alice).get(reverse("experiments:run", args=[run.code]), HTTP_HX_REQUEST="true")
    assert page.status_code == 200
    assert "2 calls were made again" in page.content.decode()


def test_recount_puts_wrong_counters_right(experiment, start, capsys):
    run = start(experiment)
    RunCounters.objects.filter(run=run).update(queued=1, judged=9)
    assert run_counters.recount() == [run.pk]
    assert_exact(run)
    assert run_counters.recount() == []
    RunCounters.objects.filter(run=run).delete()  # a run whose row was lost
    call_command("recount_runs")
    assert f"run {run.pk}" in capsys.readouterr().out
    assert_exact(run)


@pytest.mark.django_db(transaction=True)
def test_two_workers_recording_at_once_keep_them_exact(experiment, start):
    experiment.sample_size, experiment.repetitions = 12, 10
    experiment.save()
    run = start(experiment, inference_only=True)  # 240 attempts, two arms
    workers = [spawn_worker(), spawn_worker()]
    try:
        assert wait_until(lambda: run.attempts.filter(status=AttemptStatus.QUEUED).count() == 0, 60)
        assert wait_until(lambda: not run.attempts.filter(status=AttemptStatus.RUNNING).exists(), 60)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait(timeout=10)
    # Both took part: each attempt recorded once, by one of two processes.
    assert run.attempts.exclude(claimed_by="").values("claimed_by").distinct().count() == 2
    assert counters_of(run)["completed"] + counters_of(run)["failed"] == 240
    assert_exact(run)


def sqlite_tables() -> sqlite3.Connection:
    """The counted tables' columns in a real SQLite database, with the demo's triggers."""
    db = sqlite3.connect(":memory:")
    db.executescript(
        "CREATE TABLE experiments_run (id INTEGER PRIMARY KEY, evaluator_profile_id INTEGER);"
        "CREATE TABLE experiments_attempt (id INTEGER PRIMARY KEY, run_id INTEGER, status TEXT,"
        " repeat_calls INTEGER DEFAULT 0, cost_usd DECIMAL, error_category TEXT DEFAULT '');"
        "CREATE TABLE evaluation_verdict (id INTEGER PRIMARY KEY, run_id INTEGER, profile_id INTEGER, status TEXT);"
        "CREATE TABLE experiments_runcounters (run_id INTEGER PRIMARY KEY, queued INTEGER, running INTEGER,"
        " completed INTEGER, failed INTEGER, cancelled INTEGER, repeat_calls INTEGER, judged INTEGER,"
        " spent_usd DECIMAL, budget_refused INTEGER);"
    )
    for statement in run_counters.trigger_sql("sqlite"):
        db.execute(statement)
    return db


def test_the_sqlite_triggers_count_every_change():
    db = sqlite_tables()
    db.execute("INSERT INTO experiments_run VALUES (1, 7)")
    db.executemany("INSERT INTO experiments_attempt (run_id, status) VALUES (1, ?)", [("queued",)] * 5)
    db.execute("UPDATE experiments_attempt SET status = 'running' WHERE id IN (1, 2, 3)")
    db.execute(
        "UPDATE experiments_attempt SET status = 'completed', repeat_calls = 2, cost_usd = 0.5 WHERE id IN (1, 2)"
    )
    db.execute("UPDATE experiments_attempt SET status = 'failed', error_category = 'budget_exceeded' WHERE id = 4")
    db.execute("UPDATE experiments_attempt SET status = 'cancelled' WHERE status = 'queued'")
    db.execute("DELETE FROM experiments_attempt WHERE id = 3")
    db.executemany(
        "INSERT INTO evaluation_verdict (run_id, profile_id, status) VALUES (1, ?, ?)",
        [(7, "pending"), (7, "judged"), (8, "judged")],
    )
    db.execute("UPDATE evaluation_verdict SET status = 'evaluator_error' WHERE status = 'pending'")
    db.execute("DELETE FROM evaluation_verdict WHERE id = 2")
    counters = db.execute("SELECT * FROM experiments_runcounters").fetchall()
    #             run queued running completed failed cancelled repeat_calls judged spent refused
    assert counters == [(1, 0, 0, 2, 1, 1, 4, 1, 1.0, 1)]
