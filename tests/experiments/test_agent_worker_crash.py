"""A real worker killed in the middle of an agent's trajectory: the attempt is claimed again,
the turns the dead worker was answered are replayed from the journal (the model is not asked
them again), and the loop goes on from the first turn nobody paid for."""

import signal

import pytest

from datasets.demo import load_demo_dataset
from experiments import answer_journal
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.models import Artifact, ArtifactKind, AttemptStatus, RunStatus
from experiments.trajectory import Ended, Trajectory
from prbench import metrics
from prbench.queues import get_connection
from tests.conftest import work_queue
from tests.experiments.test_worker_crash import reclaimed_after_its_lease, spawn_worker, wait_until

# Slow turns, so the worker is certainly between turns 2 and the end when it is killed.
AGENT = {"mode": "oracle", "solver": "agent", "max_turns": 12, "latency_ms": 700}


def asked_turns() -> float:
    return metrics.AGENT_TURNS.labels("mock")._value.get()


@pytest.mark.django_db(transaction=True)
def test_a_killed_workers_agent_attempt_pays_for_no_journalled_turn_again(org, alice):
    dataset = load_demo_dataset(org)
    spec = ExperimentSpec(
        name="agent crash", dataset=dataset, arms=[ArmSpec("agent", "mock", "m", AGENT)], sample_size=1, seed=3
    )
    run = do_start_run(do_save_experiment(org, spec, alice))
    attempt = run.attempts.get()
    journal = get_connection()
    worker = spawn_worker()
    try:
        journalled = lambda: journal.hlen(answer_journal.turns_key(attempt.pk))  # noqa: E731
        assert wait_until(lambda: journalled() >= 2, timeout=60), "the worker never got two turns"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        paid_before = journalled()
        sent_before = journal.hlen(answer_journal.sent_key(attempt.pk))
        attempt.refresh_from_db()
        assert attempt.status == AttemptStatus.RUNNING and attempt.claims == 1

        assert reclaimed_after_its_lease() == 1
        before = asked_turns()
        work_queue()
    finally:
        if worker.poll() is None:
            worker.kill()
    run.refresh_from_db()
    attempt.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert attempt.status == AttemptStatus.COMPLETED and attempt.claims == 2 and attempt.resolved is True
    steps = Trajectory.from_json(Artifact.objects.get(attempt=attempt, kind=ArtifactKind.TRAJECTORY).content)
    assert steps.ended == Ended.SUBMITTED
    recovered = [step.turn for step in steps.steps if step.recovered]
    # Exactly the turns the dead worker journalled, read back; only the rest were asked.
    assert recovered == list(range(1, paid_before + 1))
    # A turn the dead worker had sent but got no answer for (it died mid-call) is asked
    # again, and counted; journalled turns are not.
    assert attempt.repeat_calls == sent_before - paid_before
    assert asked_turns() - before == len(steps.steps) - paid_before
    assert attempt.turns == len(steps.steps)
    assert answer_journal.RECOVERED in attempt.warnings
    # Recorded: the journal has nothing left to recover.
    assert not journal.exists(answer_journal.turns_key(attempt.pk))
