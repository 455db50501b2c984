"""Which environment a task's tests run in, and building it (evaluation/environments.py).

A task on a repository with a recipe (``EnvironmentRecipe`` for its repository and version,
else for its repository) runs in the environment keyed by that recipe and by its dependency
files at the task's base commit; a task without one runs with the worker's own Python, as
the demo's do. ``runtime_for`` gives a validation its environment, building it first if this
worker has none (under the key's lock: a second worker waits for the first one's build).

A build that fails quarantines every task known to use it, with the log's last lines, and
the build is recorded as failed: later validations of those tasks fail at once as the
platform's failure (``EnvironmentUnavailable``) instead of building again. ``environments
build --retry`` (or a changed recipe, which changes the key) tries again.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from django.apps import apps
from django.db import transaction
from django.db.models import Count, JSONField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Now
from django.utils import timezone

from datasets.background import enqueue_on_commit
from datasets.models import Dataset, EnvironmentRecipe, TaskInstance
from evaluation.environments import (
    BuildFailed,
    BuildLog,
    Built,
    EnvironmentUnavailable,
    ExportCheckout,
    Recipe,
    Runtime,
    build,
    capabilities,
    describe_needs,
    environment_key,
    missing_need,
    needs_of,
    runtime,
)
from evaluation.models import Environment, EnvironmentStatus
from evaluation.repositories import RepositoryUnavailable, ensure_commit, export_tree, read_files, release_before

ENVIRONMENT_QUARANTINE = "environment: "
BUILD_JOB_TIMEOUT_S = 4 * 3600
PROGRESS_EVERY_S = 1.0
# (the recipe, repository, base commit) -> key: the dependency files are read once per process.
_keys: dict[tuple[str, str, str], str] = {}


def recipe_for(task: TaskInstance, recipes: list[EnvironmentRecipe] | None = None) -> EnvironmentRecipe | None:
    """The task's repository's recipe for its version, else for every version; None for a
    self-contained task or a repository without one (the worker's own Python). ``recipes``:
    its dataset's, read once for many tasks (``prepare_environments``)."""
    if not task.repo:
        return None
    if recipes is None:
        recipes = list(EnvironmentRecipe.objects.filter(dataset_id=task.dataset_id, repo=task.repo))
    found = {
        recipe.version: recipe
        for recipe in recipes
        if recipe.dataset_id == task.dataset_id and recipe.repo == task.repo and recipe.version in (task.version, "")
    }
    return found.get(task.version) or found.get("")


# -- what tasks need of their worker ----------------------------------------------------------


def recipe_needs(recipe: EnvironmentRecipe | None) -> tuple[str, ...]:
    """What a worker must have to build and use ``recipe``'s environment; nothing without one."""
    return () if recipe is None else needs_of(recipe.python, recipe.system_packages)


def with_recipe_needs(rows: QuerySet[Any], task: str = "") -> QuerySet[Any]:
    """``rows`` (tasks, or rows whose task is at ``task``: "task__" for attempts) with their
    task's recipe's ``recipe_python`` and ``recipe_system_packages``, null without one: the
    recipe ``recipe_for`` picks (the task's version's, else every version's), in the same query."""
    recipes = (
        EnvironmentRecipe.objects.filter(dataset_id=OuterRef(f"{task}dataset_id"), repo=OuterRef(f"{task}repo"))
        .filter(Q(version=OuterRef(f"{task}version")) | Q(version=""))
        .exclude(repo="")
        .order_by("-version")  # the task's own version before "" (every version)
    )
    return rows.annotate(
        recipe_python=Subquery(recipes.values("python")[:1]),
        recipe_system_packages=Subquery(recipes.values("system_packages")[:1], output_field=JSONField()),
    )


def needs_of_rows(rows: QuerySet[Any], task: str = "") -> dict[int, tuple[str, ...]]:
    """Each row's task's needs, by the row's id, in one query (``with_recipe_needs``)."""
    found = with_recipe_needs(rows, task).values_list("pk", "recipe_python", "recipe_system_packages")
    return {pk: needs_of_recipe_row(python, packages) for pk, python, packages in found}


def needs_of_recipe_row(python: str | None, system_packages: list[str] | None) -> tuple[str, ...]:
    """The needs of a row ``with_recipe_needs`` annotated: nothing when its task has no recipe."""
    return needs_of(python, system_packages or ()) if python else ()


def named_system_packages() -> set[str]:
    """Every system package a recipe names: those a worker is asked whether it has."""
    lists = EnvironmentRecipe.objects.exclude(system_packages=[]).values_list("system_packages", flat=True)
    return {name for names in lists for name in names}


def worker_capabilities(also_probe: Iterable[str] = ()) -> tuple[str, ...]:
    """What this worker has, of what recipes (and ``also_probe``) can name."""
    return capabilities({*named_system_packages(), *also_probe})


# What this process's worker found it has (experiments/worker.py sets it as it looks for
# queues); None in a process that is no such worker, which works it out when asked.
_this_process: tuple[str, ...] | None = None


def set_this_process_capabilities(found: tuple[str, ...] | None) -> None:
    global _this_process
    _this_process = found


def this_process_capabilities() -> tuple[str, ...]:
    return worker_capabilities() if _this_process is None else _this_process


def serves(has: Iterable[str], needs: Iterable[str]) -> bool:
    """Whether a worker that ``has`` these capabilities can run work that ``needs`` these."""
    return set(needs) <= set(has)


def live_capabilities() -> list[tuple[str, ...]]:
    """What each live worker advertises with its lease (experiments/liveness.py). The lease is
    the experiments app's, named here as models name each other across apps: by string."""
    leases = apps.get_model("experiments", "WorkerLease").objects.filter(expires_at__gt=Now())
    return [tuple(found) for found in leases.values_list("capabilities", flat=True)]


def waiting_for(needs: tuple[str, ...], live: list[tuple[str, ...]]) -> str:
    """``needs`` in words ("Python 3.9") when no live worker has all of them; empty when one does."""
    if not needs or any(serves(has, needs) for has in live):
        return ""
    return describe_needs(needs)


def key_for(task: TaskInstance, recipe: EnvironmentRecipe) -> str:
    made = recipe.recipe()
    cached = (json.dumps(made.as_fields(), sort_keys=True), task.repo, task.base_commit)
    if cached not in _keys:
        clone = _clone(task)
        files = read_files(clone, task.base_commit, list(made.dependency_paths()))
        _keys[cached] = environment_key(made, files, task.base_commit)
    return _keys[cached]


def _clone(task: TaskInstance) -> Path:
    return ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)


def runtime_for(task: TaskInstance, recipes: list[EnvironmentRecipe] | None = None) -> tuple[str, Runtime] | None:
    """The task's environment (its key and how to use it), built now if this worker has
    none; None when the task has no recipe. Raises EnvironmentUnavailable when it cannot be
    had: the build failed (now or before), or the worker lacks what the recipe needs."""
    recipe = recipe_for(task, recipes)
    if recipe is None:
        return None
    key = key_for(task, recipe)
    _remember_key(task, key)
    if found := runtime(key):
        return key, found
    return key, do_build(task, recipe, key).runtime


# What a task's ``prepared_environment`` holds before ``prepare_environments`` has run.
UNPREPARED = object()


def prepare_environments(tasks: list[TaskInstance]) -> None:
    """Resolve (and build, if need be) each task's environment now, and keep the answer on the
    task: the pipeline's pool threads validate without touching the database. Their datasets'
    recipes are read in one query."""
    repository_tasks = [task for task in tasks if task.repo]
    if not repository_tasks:
        return
    recipes = list(EnvironmentRecipe.objects.filter(dataset_id__in={task.dataset_id for task in repository_tasks}))
    for task in repository_tasks:
        try:
            task.prepared_environment = runtime_for(task, recipes)  # type: ignore[attr-defined]
        except EnvironmentUnavailable as exc:
            task.prepared_environment = exc  # type: ignore[attr-defined]


def environment_of(task: TaskInstance) -> tuple[str, Runtime] | None:
    """``runtime_for``, as ``prepare_environments`` found it when it ran for this task object."""
    prepared = getattr(task, "prepared_environment", UNPREPARED)
    if prepared is UNPREPARED:
        return runtime_for(task)
    if isinstance(prepared, EnvironmentUnavailable):
        raise prepared
    return cast(tuple[str, Runtime] | None, prepared)


def _remember_key(task: TaskInstance, key: str) -> None:
    if task.environment_key != key:
        TaskInstance.objects.filter(pk=task.pk).update(environment_key=key)
        task.environment_key = key


def _label(recipe: EnvironmentRecipe, task: TaskInstance) -> str:
    label = f"{recipe.repo} {recipe.version or 'every version'}, Python {recipe.python}"
    # An environment with a checkout build is one commit's (it holds what that commit compiles).
    return f"{label}, at {task.base_commit[:12]}" if recipe.checkout_build else label


def _failed_text(record: Environment) -> str:
    return f"environment {record.short_key} ({record.label}) could not be built:\n{record.failure}"


def do_build(
    task: TaskInstance,
    recipe: EnvironmentRecipe,
    key: str,
    retry: bool = False,
    on_progress: Callable[[BuildLog], None] | None = None,
) -> Built:
    """Build the environment ``key`` for ``task`` (nothing to do when this worker has it),
    recording progress, the log and the outcome; a failure quarantines the tasks that use it
    and raises BuildFailed. A recorded failure is not tried again unless ``retry``.
    ``on_progress`` is told of each step too (a command's progress bar)."""
    try:
        built = do_build_at(
            key, recipe.recipe(), _label(recipe, task), lambda target: _export(task, target), retry, on_progress
        )
    except BuildFailed as exc:
        if exc.log is not None:  # this build failed now, not an earlier one
            do_quarantine_users(key, task, f"{exc}")
        raise
    if not built.reused:
        do_lift_quarantine(key)
    return built


def do_build_at(
    key: str,
    recipe: Recipe,
    label: str,
    export_checkout: ExportCheckout,
    retry: bool = False,
    on_progress: Callable[[BuildLog], None] | None = None,
) -> Built:
    """Build ``key`` from ``recipe`` (unless this worker has it), with its record: progress
    while it builds, then the log, time and size, or why it failed. Raises BuildFailed,
    whose ``log`` is set only when this call's build failed; EnvironmentUnavailable when this
    worker lacks what the recipe needs (its failure, not the recipe's: nothing recorded)."""
    record, _ = Environment.objects.get_or_create(key=key, defaults={"label": label, "recipe": recipe.as_fields()})
    if found := runtime(key):
        if record.status != EnvironmentStatus.READY:  # built by a worker that could not record it
            _finish(key, EnvironmentStatus.READY, record.log)
        return Built(key, found, 0.0, 0, "", reused=True)
    if record.status == EnvironmentStatus.FAILED and not retry:
        raise BuildFailed(_failed_text(record))
    if need := missing_need(recipe):
        raise EnvironmentUnavailable(f"environment {key[:12]} ({label}) {need}")
    try:
        recorded = _progress_writer(key)

        def progress(log: BuildLog) -> None:
            recorded(log)
            if on_progress is not None:
                on_progress(log)

        built = build(key, recipe, export_checkout, BuildLog(report=progress))
    except BuildFailed as exc:
        log = exc.log or BuildLog()
        _finish(key, EnvironmentStatus.FAILED, log.text(), failure=log.tail() or str(exc), reason=str(exc))
        raise BuildFailed(_failed_text(Environment.objects.get(key=key)), log) from None
    except RepositoryUnavailable as exc:
        # Not the recipe's failure (a clone missing objects, say): the record says why it was
        # not built, rather than waiting for ever as "queued".
        Environment.objects.filter(key=key).update(step=f"not built: {exc}"[:300], finished_at=timezone.now())
        raise
    if not built.reused:
        _finish(key, EnvironmentStatus.READY, built.log, seconds=built.seconds, size=built.size_bytes)
    return built


def environment_at(clone: Path, commit: str, recipe: Recipe, label: str) -> tuple[str, Runtime]:
    """The environment ``recipe`` makes for ``commit`` of a cached clone (mining's candidates,
    which have no task yet), built if need be."""
    key = environment_key(recipe, read_files(clone, commit, list(recipe.dependency_paths())), commit)

    def export(target: Path) -> str:
        export_tree(clone, commit, target)
        return release_before(clone, commit)

    built = do_build_at(key, recipe, label, export)
    return key, built.runtime


def _export(task: TaskInstance, target: Path) -> str:
    clone = _clone(task)
    export_tree(clone, task.base_commit, target)
    return release_before(clone, task.base_commit)


def _progress_writer(key: str) -> Callable[[BuildLog], None]:
    """Writes the build's step to its record, at most once a second (and at the first step)."""
    last = [0.0]
    builder = f"{socket.gethostname()}:{os.getpid()}"

    def report(log: BuildLog) -> None:
        now = time.monotonic()
        if last[0] and now - last[0] < PROGRESS_EVERY_S and log.steps_done < log.steps_total:
            return
        changes = {"step": log.step[:300], "steps_done": log.steps_done, "steps_total": log.steps_total,
                   "log": log.text()}  # fmt: skip
        if not last[0]:
            changes |= {"status": EnvironmentStatus.BUILDING, "builder": builder, "started_at": timezone.now(),
                        "failure": "", "finished_at": None}  # fmt: skip
        last[0] = now
        Environment.objects.filter(key=key).update(**changes)

    return report


def _finish(
    key: str,
    status: str,
    log: str,
    failure: str = "",
    reason: str = "",
    seconds: float | None = None,
    size: int | None = None,
) -> None:
    changes = {"status": status, "log": log, "failure": failure, "finished_at": timezone.now()}
    if reason:
        changes["step"] = reason[:300]
    if seconds is not None:
        changes["build_seconds"] = round(seconds, 2)
    if size is not None:
        changes["size_bytes"] = size
    if status == EnvironmentStatus.READY:
        changes["steps_done"] = Environment.objects.get(key=key).steps_total
    Environment.objects.filter(key=key).update(**changes)


@transaction.atomic
def do_quarantine_users(key: str, task: TaskInstance, why: str) -> int:
    """Quarantine every task known to use ``key`` (and ``task``), saying why; returns how many."""
    users = TaskInstance.objects.filter(Q(environment_key=key) | Q(pk=task.pk)).exclude(quarantined=True)
    return users.update(quarantined=True, quarantine_reason=f"{ENVIRONMENT_QUARANTINE}{why}"[:5000])


def do_lift_quarantine(key: str) -> int:
    """A build that now succeeds lifts the quarantine its failure put on its tasks (only that one)."""
    return TaskInstance.objects.filter(
        environment_key=key, quarantined=True, quarantine_reason__startswith=ENVIRONMENT_QUARANTINE
    ).update(quarantined=False, quarantine_reason="")


# -- builds on the queue --------------------------------------------------------------------


def tasks_needing_environments(tasks: Iterable[TaskInstance]) -> dict[str, tuple[TaskInstance, EnvironmentRecipe]]:
    """One task per environment key among ``tasks`` (those with a recipe), to build it with."""
    found: dict[str, tuple[TaskInstance, EnvironmentRecipe]] = {}
    for task in tasks:
        if (recipe := recipe_for(task)) is None:
            continue
        key = key_for(task, recipe)
        _remember_key(task, key)
        found.setdefault(key, (task, recipe))
    return found


def enqueue_builds(tasks: Iterable[TaskInstance], retry: bool = False) -> list[str]:
    """Queue a build of every environment ``tasks`` need that this worker has not built;
    returns their keys. One job per key (its id is the key's), so queuing twice builds once."""
    queued = []
    for key, (task, recipe) in tasks_needing_environments(tasks).items():
        if runtime(key):
            continue
        record, _ = Environment.objects.get_or_create(
            key=key, defaults={"label": _label(recipe, task), "recipe": recipe.recipe().as_fields()}
        )
        if record.status == EnvironmentStatus.FAILED and not retry:
            continue
        Environment.objects.filter(key=key).update(status=EnvironmentStatus.QUEUED, step="waiting for a worker")
        job = build_environment_job_retrying if retry else build_environment_job
        # On the queue of the workers that can build it: those its tasks' attempts go to.
        enqueue_on_commit(job, task.pk, f"environment-{key}", BUILD_JOB_TIMEOUT_S, recipe_needs(recipe))
        queued.append(key)
    return queued


def build_environment_job(task_id: int, retry: bool = False) -> str:
    """RQ job: build the environment ``task_id``'s tests need. Safe to run twice: the second
    run finds it built (or waits on the first one's lock, then finds it built)."""
    task = TaskInstance.objects.select_related("dataset").filter(pk=task_id).first()
    if task is None or (recipe := recipe_for(task)) is None:
        return "nothing to build"
    key = key_for(task, recipe)
    _remember_key(task, key)
    try:
        built = do_build(task, recipe, key, retry=retry)
    except EnvironmentUnavailable as exc:
        return f"failed: {exc}"
    return f"{'reused' if built.reused else 'built'} {key[:12]} in {built.seconds:.1f}s"


def build_environment_job_retrying(task_id: int) -> str:
    return build_environment_job(task_id, retry=True)


# -- what a dataset's pages and commands show ------------------------------------------------


@dataclass(frozen=True)
class UsedEnvironment:
    """An environment the dataset's tasks use, as far as they are known to: its key, its
    build's record (None before anything asked for it), how many of the tasks use it and for
    which of the dataset's repositories (the record's own label may name another
    organisation's: a key is shared by every task whose recipe and dependency files match)."""

    key: str
    record: Environment | None
    tasks: int
    used_for: str
    # Queued, and no live worker has what it needs: "Python 3.9" (``waiting_for``).
    waiting_for: str = ""

    @property
    def short_key(self) -> str:
        return self.key[:12]

    @property
    def is_busy(self) -> bool:
        return self.record is not None and self.record.status in (EnvironmentStatus.QUEUED, EnvironmentStatus.BUILDING)


def used_environments(dataset: Dataset) -> list[UsedEnvironment]:
    """The environments the dataset's tasks carry keys of (``environment_key``): another
    organisation's build record is reached only through a key its own tasks carry."""
    rows = (
        dataset.tasks.exclude(environment_key="")
        .values("environment_key", "repo", "version")
        .annotate(count=Count("pk"))
        .order_by("environment_key", "repo", "version")
    )
    counts: dict[str, int] = {}
    used_for: dict[str, list[str]] = {}
    for row in rows:
        counts[row["environment_key"]] = counts.get(row["environment_key"], 0) + row["count"]
        used_for.setdefault(row["environment_key"], []).append(f"{row['repo']} {row['version']}".strip())
    records = {record.key: record for record in Environment.objects.filter(key__in=counts)}
    waiting = _waiting_builds([record for record in records.values() if record.status == EnvironmentStatus.QUEUED])
    return [
        UsedEnvironment(key, records.get(key), count, ", ".join(used_for[key]), waiting.get(key, ""))
        for key, count in counts.items()
    ]


def _waiting_builds(queued: list[Environment]) -> dict[str, str]:
    """Of queued builds, those no live worker can take, by key: what they wait for, in words."""
    if not queued:
        return {}
    live = live_capabilities()
    found = {record.key: waiting_for(Recipe.from_fields(record.recipe).needs, live) for record in queued}
    return {key: words for key, words in found.items() if words}


def used_environment(dataset: Dataset, key: str) -> UsedEnvironment | None:
    """``key``'s environment when one of the dataset's tasks uses it; else None."""
    return next((env for env in used_environments(dataset) if env.key == key), None)


PLAN_JOB_TIMEOUT_S = 3600  # cloning the dataset's repositories, to read their dependency files


def enqueue_dataset_builds_job(dataset_id: int, retry: bool = False) -> str:
    """RQ job: queue a build of every environment the dataset's tasks need (``enqueue_builds``).
    A job, not the request that asked: working out the keys clones each repository."""
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if dataset is None:
        return "no such dataset"
    queued = enqueue_builds(dataset.tasks.select_related("dataset").order_by("position"), retry=retry)
    return f"queued {len(queued)} build(s)"


def enqueue_dataset_builds_retrying_job(dataset_id: int) -> str:
    return enqueue_dataset_builds_job(dataset_id, retry=True)


def do_request_builds(dataset: Dataset, retry: bool = False) -> None:
    """Build the dataset's environments on the queue (failed ones again with ``retry``)."""
    job = enqueue_dataset_builds_retrying_job if retry else enqueue_dataset_builds_job
    enqueue_on_commit(job, dataset.pk, f"environments-of-{dataset.pk}", PLAN_JOB_TIMEOUT_S)
