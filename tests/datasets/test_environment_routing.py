"""A task's needs come from its recipe (its version's, else every version's), looked up in SQL;
a build goes to the queue of the workers that can build it; a queued build no live worker can
take says what it waits for, in ``environments list`` and on the dataset's page."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from datasets.environments import enqueue_builds, needs_of_rows
from datasets.models import EnvironmentRecipe
from evaluation.models import Environment, EnvironmentStatus
from experiments import liveness
from experiments.models import WorkerLease
from prbench.queues import get_queue
from tests.cli import run_command
from tests.conftest import client_for, work_queue
from tests.datasets.conftest import REPO


def recipe(dataset, version: str = "", python: str = "3.11", system_packages: tuple[str, ...] = ()):
    return EnvironmentRecipe.objects.create(
        dataset=dataset, repo=REPO, version=version, python=python, project="", system_packages=list(system_packages)
    )


def advertise_only(*capabilities: str) -> None:
    """The only live worker is this process, and its lease (left by an earlier test's worker,
    perhaps) says exactly this. Leases its earlier heartbeats committed are gone."""
    liveness.advertise(tuple(capabilities))
    assert liveness.heartbeat().renew_now()
    WorkerLease.objects.exclude(name=liveness.heartbeat().name).delete()


def live_lease(*capabilities: str) -> None:
    now = timezone.now()
    WorkerLease.objects.create(name=uuid.uuid4().hex, hostname="py39", pid=1, started_at=now,
                               expires_at=now + timedelta(minutes=1), capabilities=list(capabilities))  # fmt: skip


def test_a_tasks_needs_are_its_versions_recipes_in_one_query(repo_dataset, django_assert_num_queries):
    recipe(repo_dataset, version="1.0", python="3.9")
    recipe(repo_dataset, python="3.12", system_packages=("git", "ffmpeg"))
    with django_assert_num_queries(1):
        needs = needs_of_rows(repo_dataset.tasks.all())
    by_id = dict(repo_dataset.tasks.values_list("external_id", "pk"))
    assert needs[by_id["tiny-0"]] == needs[by_id["tiny-1"]] == ("python3.9",)
    assert needs[by_id["tiny-2"]] == ("python3.12", "sys:ffmpeg", "sys:git")
    assert needs[by_id["alone"]] == ()  # self-contained: the worker's own Python, any worker


def test_a_build_goes_to_the_queue_of_the_workers_that_can_build_it(
    repo_dataset, environment_cache, django_capture_on_commit_callbacks
):
    recipe(repo_dataset, system_packages=("git",))
    with django_capture_on_commit_callbacks(execute=True):
        [key] = enqueue_builds(repo_dataset.tasks.select_related("dataset"))
    queue = get_queue("env:python3.11+sys:git")
    assert queue.job_ids == [f"environment-{key}"] and not get_queue().count
    work_queue()  # this worker has Python 3.11 and git: it listens there, and builds it
    assert Environment.objects.get(key=key).status == EnvironmentStatus.READY


def test_a_build_no_live_worker_can_take_says_what_it_waits_for(
    alice, org, repo_dataset, environment_cache, django_capture_on_commit_callbacks
):
    recipe(repo_dataset, python="3.9")
    with django_capture_on_commit_callbacks(execute=True):
        [key] = enqueue_builds(repo_dataset.tasks.select_related("dataset"))
    assert get_queue("env:python3.9").job_ids == [f"environment-{key}"]
    advertise_only("python3.11")
    waiting = "waiting for a worker with Python 3.9"
    listed = run_command("environments", "list", "--org", org.slug, "--dataset", "tiny")
    assert f"  environment {key[:12]}  {waiting}  3 task(s)" in listed
    page = client_for(alice).get(reverse("datasets:detail", args=[repo_dataset.code])).content.decode()
    assert "Waiting for a worker with Python 3.9" in page and "Building…" not in page

    live_lease("python3.11", "python3.9")  # a worker machine with Python 3.9 joined
    listed = run_command("environments", "list", "--org", org.slug, "--dataset", "tiny")
    assert f"  environment {key[:12]}  queued  3 task(s)" in listed
    page = client_for(alice).get(reverse("datasets:environments", args=[repo_dataset.code])).content.decode()
    assert "Waiting for a worker" not in page and "Building…" in page
