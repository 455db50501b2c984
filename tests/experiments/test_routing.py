"""Attempts go to the queue of the workers that have what their task's recipe needs (an
interpreter, system packages): a worker without it leaves them, one with it takes them; a
worker handed one it cannot run gives it back; recovery, run_has_jobs and the run page see
the needs queues. Which interpreters a worker has is set by PRBENCH_PYTHONS, with a stand-in
script that reports itself as Python 3.9."""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from datasets.models import EnvironmentRecipe
from evaluation.environments import PYTHON_NEED, available_pythons, describe_needs, needs_of
from experiments import liveness, worker
from experiments.attempt_queue import enqueue_attempts, run_has_jobs
from experiments.models import Attempt, AttemptStatus, RunStatus, WorkerLease
from experiments.worker import AttemptWorker
from prbench.queues import get_connection, get_queue, needs_queue_name, queue_for_needs, worker_queues
from prbench.recovery import run_recovery_sweep
from tests.conftest import client_for, work_queue
from tests.experiments.test_database_outage import count_users, drop_our_connection

LEGACY = "acme/legacy"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
NEEDS_39 = "env:python3.9"


@pytest.fixture
def pythons(settings, tmp_path):
    """``pythons("3.11", "3.9")``: the interpreters this worker has from now on."""
    stand_in = tmp_path / "python3.9"
    stand_in.write_text('#!/bin/sh\necho 3.9\necho "$0"\n')
    stand_in.chmod(0o755)

    def have(*versions: str) -> None:
        settings.PRBENCH_PYTHONS = [sys.executable, *([str(stand_in)] if "3.9" in versions else [])]
        available_pythons.cache_clear()
        assert set(available_pythons()) == set(versions)

    yield have
    available_pythons.cache_clear()


def needing_python_39(dataset):
    """Half the demo's tasks (odd positions) move to a repository whose recipe needs Python
    3.9; the others stay self-contained. Returns a function telling an attempt's needs."""
    dataset.tasks.filter(position__in=[p for p in range(0, 100) if p % 2]).update(repo=LEGACY, version="1.0")
    EnvironmentRecipe.objects.create(dataset=dataset, repo=LEGACY, version="", python="3.9", project="")
    return lambda attempt: ("python3.9",) if attempt.task.repo else ()


@pytest.fixture
def legacy(dataset):
    return needing_python_39(dataset)


def queued_ids(name: str) -> set[int]:
    queue = get_queue(name)
    return {pk for job in queue.get_jobs() for pk in job.args[1]}


def split(run, legacy) -> tuple[set[int], set[int]]:
    attempts = list(run.attempts.select_related("task"))
    needing = {a.pk for a in attempts if legacy(a)}
    assert needing and len(needing) < len(attempts)  # the sample holds both kinds
    return needing, {a.pk for a in attempts} - needing


def assert_only_the_others_ran(run, needing: set[int], others: set[int]) -> None:
    """The attempts a worker without Python 3.9 can run completed; the others are still
    queued and were never claimed."""
    statuses = dict(run.attempts.values_list("pk", "status"))
    assert {statuses[pk] for pk in others} == {AttemptStatus.COMPLETED}
    assert {statuses[pk] for pk in needing} == {AttemptStatus.QUEUED}
    assert not Attempt.objects.filter(pk__in=needing, claims__gt=0).exists()


def advertise_only(*capabilities: str) -> None:
    """The only live worker is this process, and its lease (left by an earlier test's worker,
    perhaps) says exactly this. Leases its earlier heartbeats committed are gone."""
    liveness.advertise(tuple(capabilities))
    assert liveness.heartbeat().renew_now()
    WorkerLease.objects.exclude(name=liveness.heartbeat().name).delete()


def test_the_first_interpreter_named_for_a_version_wins_though_they_are_asked_at_once(settings, tmp_path):
    """Interpreters are asked for their version all at once: the first candidate of a version
    still wins when a later one answers sooner."""
    slow, quick = tmp_path / "slow", tmp_path / "quick"
    slow.write_text('#!/bin/sh\nsleep 0.5\necho 3.9\necho "$0"\n')
    quick.write_text('#!/bin/sh\necho 3.9\necho "$0"\n')
    for script in (slow, quick):
        script.chmod(0o755)
    settings.PRBENCH_PYTHONS = [str(slow), str(quick), str(quick)]
    available_pythons.cache_clear()
    try:
        assert available_pythons() == {"3.9": str(slow)}
    finally:
        available_pythons.cache_clear()


def test_needs_are_canonical_and_name_their_queue():
    assert needs_of("3.9", ["git", "ffmpeg", "git"]) == ("python3.9", "sys:ffmpeg", "sys:git")
    assert needs_queue_name(needs_of("3.9", ["ffmpeg"])) == "env:python3.9+sys:ffmpeg"
    assert needs_queue_name(()) == "default" and needs_of("", []) == ()
    assert describe_needs(("python3.9", "sys:ffmpeg", "sys:git")) == "Python 3.9 and system packages ffmpeg, git"


def test_attempts_wait_on_the_queue_of_what_their_task_needs(experiment, legacy, start, django_assert_num_queries):
    run = start(experiment, inference_only=True)
    needing, others = split(run, legacy)
    assert queued_ids(NEEDS_39) == needing and queued_ids("default") == others

    get_connection().flushdb()
    with django_assert_num_queries(1):  # the needs of every attempt in one query
        enqueue_attempts(run.pk, [*needing, *others])
    assert queued_ids(NEEDS_39) == needing and queued_ids("default") == others


def test_a_worker_without_the_python_leaves_them_and_one_with_it_takes_them(experiment, legacy, start, pythons):
    run = start(experiment, inference_only=True)
    needing, others = split(run, legacy)
    pythons("3.11")
    work_queue()
    assert_only_the_others_ran(run, needing, others)  # those needing 3.9 not even claimed
    assert queued_ids(NEEDS_39) == needing and run_has_jobs(run.pk)

    pythons("3.11", "3.9")
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    # Taken, once each (they then fail: the stand-in has no repository to check them out from).
    assert set(Attempt.objects.filter(pk__in=needing).values_list("status", "claims")) == {(AttemptStatus.FAILED, 1)}


def test_a_worker_hands_back_what_it_cannot_run_unclaimed(experiment, dataset, start, pythons):
    run = start(experiment, inference_only=True)  # no recipe yet: every job on "default"
    assert not get_queue(NEEDS_39).count
    legacy = needing_python_39(dataset)  # now half the tasks need Python 3.9
    needing, others = split(run, legacy)
    pythons("3.11")
    work_queue()
    assert_only_the_others_ran(run, needing, others)  # no claim spent, no retry used
    assert queued_ids(NEEDS_39) == needing and not get_queue().count

    pythons("3.11", "3.9")
    work_queue()
    assert set(Attempt.objects.filter(pk__in=needing).values_list("status", "claims")) == {(AttemptStatus.FAILED, 1)}


def test_run_has_jobs_and_recovery_see_the_needs_queues(experiment, legacy, start, clean_redis):
    run = start(experiment, inference_only=True)
    needing, others = split(run, legacy)
    get_queue().empty()
    assert run_has_jobs(run.pk)  # its jobs on the needs queue are still there

    clean_redis.flushdb()  # Redis restarted without persistence
    assert not run_has_jobs(run.pk)
    report = run_recovery_sweep()
    assert report["requeued_runs"] == 1 and report["jobs"] == 2
    # Recovered work goes first: the rest on "recovery", what needs Python 3.9 on its own queue.
    assert queued_ids(NEEDS_39) == needing and queued_ids("recovery") == others


def test_a_worker_listens_to_the_needs_queues_it_can_serve_most_specific_first(db, pythons):
    pythons("3.11")
    for needs in [("python3.11",), ("python3.11", "sys:git"), ("python3.11", "sys:prbench-no-such-package"),
                  ("python3.9",)]:  # fmt: skip
        queue_for_needs(needs)
    worker_ = AttemptWorker(worker_queues(), connection=get_connection())
    worker_.listen_to_served_queues()
    served = ["env:python3.11+sys:git", "env:python3.11", "recovery", "default", "webhooks", "judging"]
    assert [queue.name for queue in worker_.queues] == served
    assert "sys:git" in worker_.capabilities and "sys:prbench-no-such-package" not in worker_.capabilities

    deliveries_only = AttemptWorker([get_queue("webhooks")], connection=get_connection())
    deliveries_only.listen_to_served_queues()
    assert [queue.name for queue in deliveries_only.queues] == ["webhooks"]


def test_an_idle_worker_picks_up_a_needs_queue_registered_meanwhile(db, pythons, monkeypatch):
    pythons("3.11")
    monkeypatch.setattr(worker, "NEEDS_REFRESH_S", 1)
    worker_ = AttemptWorker(worker_queues(), connection=get_connection())
    worker_.listen_to_served_queues()

    def new_recipes_work() -> None:
        time.sleep(1.5)
        queue_for_needs(("python3.11",)).enqueue("os.getpid")

    thread = threading.Thread(target=new_recipes_work)
    started = time.monotonic()
    thread.start()
    _, queue = worker_.dequeue_job_and_maintain_ttl(timeout=60)
    thread.join()
    assert queue.name == "env:python3.11" and time.monotonic() - started < 10

    started = time.monotonic()
    assert worker_.dequeue_job_and_maintain_ttl(timeout=60, max_idle_time=2) is None  # idle limit still holds
    assert time.monotonic() - started < 10


def test_the_lease_advertises_what_the_worker_has(db, pythons):
    pythons("3.11", "3.9")
    queue_for_needs(("python3.11", "sys:git"))
    work_queue()
    assert liveness.heartbeat().renew_now()
    lease = WorkerLease.objects.get(name=liveness.heartbeat().name)
    assert {"python3.9", "python3.11", "sys:git"} <= set(lease.capabilities)


def test_the_run_page_says_when_queued_attempts_need_what_no_live_worker_has(alice, experiment, legacy, start):
    run = start(experiment, inference_only=True)
    needing, _ = split(run, legacy)
    advertise_only("python3.11")
    client = client_for(alice)
    url = reverse("experiments:run", args=[run.code])
    line = f"{len(needing)} queued attempts wait for a worker with Python 3.9: no live worker has it."
    assert line in client.get(url).content.decode()
    assert line in client.get(url, headers={"HX-Request": "true"}).content.decode()  # the polled part too

    now = timezone.now()
    WorkerLease.objects.create(name=uuid.uuid4().hex, hostname="py39", pid=1, started_at=now,
                               expires_at=now + timedelta(minutes=1), capabilities=["python3.9"])  # fmt: skip
    assert "wait for a worker with" not in client.get(url).content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_database_outage_while_looking_for_queues_does_not_end_the_worker(pythons, caplog):
    pythons("3.11")
    job = queue_for_needs(("python3.11",)).enqueue(count_users)
    drop_our_connection()  # the worker's first look at the queues it can serve fails
    with caplog.at_level(logging.WARNING):
        AttemptWorker([get_queue()], connection=get_connection()).work(burst=True)
    assert "could not look for needs queues: OperationalError" in caplog.text
    assert job.get_status(refresh=True) == "finished"  # it looked again, on a new connection


def test_jobs_stranded_by_a_recipe_change_are_rerouted_by_the_sweep(experiment, legacy, start, pythons):
    run = start(experiment, inference_only=True)
    needing, _others = split(run, legacy)
    pythons("3.11")
    work_queue()  # the others run; the needing ones wait for a worker with Python 3.9
    assert queued_ids(NEEDS_39) == needing

    # The team moves the repository to the Python its workers have: nobody will ever serve
    # env:python3.9 now, and its jobs would wait there for ever.
    EnvironmentRecipe.objects.filter(repo=LEGACY).update(python=PYTHON)
    stranded = get_queue(NEEDS_39).count
    advertise_only(PYTHON_NEED + "3.9", PYTHON_NEED + PYTHON)
    assert run_recovery_sweep()["rerouted"] == 0  # a live worker serves it: it hands them back itself
    advertise_only(PYTHON_NEED + PYTHON)
    assert stranded and run_recovery_sweep()["rerouted"] == stranded
    assert not get_queue(NEEDS_39).count
    assert queued_ids(needs_queue_name(needs_of(PYTHON))) == needing
    assert run_recovery_sweep()["rerouted"] == 0  # where they belong now: left alone

    work_queue()
    assert set(Attempt.objects.filter(pk__in=needing).values_list("claims", flat=True)) == {1}  # taken once each
    assert not Attempt.objects.filter(pk__in=needing, status=AttemptStatus.QUEUED).exists()


def test_recovered_work_goes_first_and_needs_work_stays_on_its_needs_queue(experiment, legacy, start, settings):
    settings.PRBENCH_ATTEMPTS_PER_JOB = 1  # a job per attempt: the order of the jobs is the order of the attempts
    run = start(experiment, inference_only=True)
    needing, others = split(run, legacy)
    waiting = [job.id for job in get_queue(NEEDS_39).get_jobs()]
    recovered = sorted(needing)[:2]

    enqueue_attempts(run.pk, [*recovered, *sorted(others)], recovered=True)
    # Only a worker with Python 3.9 may run these: at the front of their own queue, in sequence.
    jobs = get_queue(NEEDS_39).get_jobs()
    assert [job.args[1] for job in jobs[:2]] == [[pk] for pk in recovered]
    assert [job.id for job in jobs[2:]] == waiting
    # The rest on "recovery", which every worker takes from before "default".
    assert queued_ids("recovery") == others
    assert [queue.name for queue in worker_queues()][:2] == ["recovery", "default"]
