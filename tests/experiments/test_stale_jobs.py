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


def test_a_job_still_waiting_on_its_own_calls_takes_up_attempts_that_came_back_to_the_queue(org, dataset, alice, start):
    """A job that found its run drained (another worker's claim beat its own, or nothing was
    left) but still has calls under way (a hanging arm's) looks at the run's queue again: the
    attempts a sweep or a give-back queued again are taken up by its idle threads, instead of
    waiting behind a job that has stopped claiming for as long as the hanging calls last."""
    arms = [ArmSpec("oracle", "mock", "m", {"mode": "oracle"})]
    run = start(do_save_experiment(org, ExperimentSpec(name="drained", dataset=dataset, arms=arms), alice))
    job = pipeline.BatchRunner(run.pk, [], threads=4)
    job.run_drained, job.running = True, 1  # drained earlier; one call of its own still under way
    assert len(job._steal(2, set())) == 2
    assert job.run_drained is False
    job.run_drained = True  # and looked at just now: not again before LOOK_AGAIN_S
    job.look_again_at = pipeline.time.monotonic() + pipeline.LOOK_AGAIN_S
    assert job._steal(2, set()) == []
    job.running = 0  # nothing of its own left: the job ends rather than wait for more
    job.look_again_at = 0
    assert job._steal(2, set()) == []


def test_a_claim_round_refused_by_a_full_arm_goes_on_to_the_other_arms_at_once(org, dataset, alice):
    """The job's first candidates are all of an arm whose slots are taken (a hanging arm's):
    the round claims nothing, but it blocks that arm and says so, and the next round, at once,
    claims the other arm's attempts. Said "nowhere", it made the job wait for a running attempt
    to end first, and by then the block had run out and the full arm's attempts were first in
    line again: the hang drill's healthy arms ran at 62% of their pace."""
    from concurrent.futures import ThreadPoolExecutor

    from experiments.actions import do_start_run
    from providers import limits

    arms = [ArmSpec("full", "mock", "m", {"mode": "oracle", "max_concurrency": 1}), ArmSpec("free", "mock", "m2", {})]
    experiment = do_save_experiment(org, ExperimentSpec(name="full arm", dataset=dataset, arms=arms), alice)
    run = do_start_run(experiment, inference_only=True)
    full, free = (run.arms.get(label=label) for label in ("full", "free"))
    taken = limits.acquire_slots(f"run-arm:{full.pk}", 1, 1)  # another worker's call holds its one slot
    ordered = list(run.attempts.order_by("sequence").values_list("pk", "arm_id"))
    first_full = [pk for pk, arm_id in ordered if arm_id == full.pk][:2]
    some_free = [pk for pk, arm_id in ordered if arm_id == free.pk][:2]
    job = pipeline.BatchRunner(run.pk, [], threads=2)
    job.pending = {pk: full.pk for pk in first_full} | {pk: free.pk for pk in some_free}
    job.run_drained = True  # only its own attempts
    with ThreadPoolExecutor(2) as pool:
        assert job._claim_and_submit(pool, 2) is True  # nothing claimed, but the full arm is blocked
        assert job.running == 0 and full.pk in job.blocked
        assert job._claim_and_submit(pool, 2) is True
        assert job.running == 2
        while job.running:
            job._collect()
    assert set(run.attempts.filter(claims=1).values_list("pk", flat=True)) == set(some_free)
    limits.release_slots(f"run-arm:{full.pk}", taken)
