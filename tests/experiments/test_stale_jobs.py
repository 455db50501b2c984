"""A job whose attempts an earlier job of the same run already took (a job works through its
run's other queued attempts when its own are done) finds nothing to do and ends: it must not
wait for an arm's slot to free up for attempts that are not queued any more."""

from experiments import pipeline
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import AttemptStatus, RunStatus
from tests.conftest import work_queue


def test_later_jobs_of_a_run_drained_by_the_first_do_not_wait_for_slots(org, dataset, alice, start, monkeypatch):
    waits = []
    monkeypatch.setattr(pipeline, "wait_for_release", lambda keys, timeout: waits.append(keys))
    arms = [ArmSpec("oracle", "mock", "m", {"mode": "oracle"}), ArmSpec("wrong", "mock", "m2", {"mode": "wrong"})]
    tasks = dataset.tasks.count()
    spec = ExperimentSpec(name="many jobs", dataset=dataset, arms=arms, repetitions=-(-100 // (2 * tasks)))
    run = start(do_save_experiment(org, spec, alice), inference_only=True)
    assert run.total_attempts >= 100  # four jobs and more (32 attempts a job)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == run.total_attempts
    assert waits == []  # before: a second's wait per round of claims in every later job
