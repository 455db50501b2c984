"""Checking a dataset's gold patches (``manage.py validate_gold``): each task's own fix is
validated ``runs`` times in the environment its runs would use, and the empty patch once if
asked. A task its gold does not resolve, or resolves only sometimes, or one the empty patch
resolves too, can rank nobody: it is quarantined with the reason, as mining quarantines
its flaky finds. Each task's finding is saved as soon as it is made, so a stopped check
picks up where it left off."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from datasets.environments import runtime_for
from datasets.models import Dataset, GoldStatus, TaskInstance
from datasets.validation import test_plan, validate_task
from evaluation.environments import EnvironmentUnavailable, in_use
from evaluation.repositories import RepositoryUnavailable, ensure_commit
from evaluation.sandbox import SandboxFailed
from evaluation.test_results import passing_ids
from evaluation.validation import ValidationResult, run_tests_with

# Quarantines this check made start so, and only those are lifted when a later check finds
# the gold patch sound: a task quarantined for another reason (mining's flaky finds) stays.
GOLD_QUARANTINE = "validate_gold: "
QUARANTINING = (GoldStatus.UNRESOLVED, GoldStatus.FLAKY, GoldStatus.TRIVIAL)


@dataclass(frozen=True)
class GoldFinding:
    task: TaskInstance
    status: str  # a GoldStatus
    detail: str


def tasks_to_check(dataset: Dataset, recheck: bool) -> QuerySet[TaskInstance]:
    """The dataset's tasks with a gold patch, in order; those already found sound or unsound
    are left out unless ``recheck`` (one that could not be checked is tried again)."""
    tasks = dataset.tasks.exclude(gold_patch="").order_by("position", "pk")
    return tasks if recheck else tasks.filter(gold_status__in=["", GoldStatus.ERROR])


def check_gold(tasks: QuerySet[TaskInstance], runs: int, empty: bool) -> Iterator[GoldFinding]:
    """Each task's finding, saved before it is yielded."""
    for task in tasks.select_related("dataset"):
        finding = judge_gold(task, runs, empty)
        do_save_finding(finding)
        yield finding


def judge_gold(task: TaskInstance, runs: int, empty: bool) -> GoldFinding:
    try:
        return _judge_gold(task, runs, empty)
    except SandboxFailed as exc:
        # The harness failed, not the gold patch: checked again next time, like a timeout.
        return GoldFinding(task, GoldStatus.ERROR, f"the sandbox failed: {exc}")


def _judge_gold(task: TaskInstance, runs: int, empty: bool) -> GoldFinding:
    try:
        results = [validate_task(task, task.gold_patch) for _ in range(runs)]
    except RepositoryUnavailable as exc:
        return GoldFinding(task, GoldStatus.ERROR, f"the repository is unavailable: {exc}")
    except EnvironmentUnavailable as exc:
        return GoldFinding(task, GoldStatus.NO_ENVIRONMENT, str(exc))
    lines = [f"run {n}: {_summary(result)}" for n, result in enumerate(results, 1)]
    if missing := next((result.environment_missing for result in results if result.environment_missing), ""):
        return GoldFinding(
            task,
            GoldStatus.NO_ENVIRONMENT,
            f"the tests cannot import {missing!r}: no environment provides the repository's dependencies "
            "(give it a recipe: manage.py environments set)\n" + "\n".join(lines),
        )
    if any(result.timed_out or not result.applied for result in results):
        status = GoldStatus.ERROR if any(r.timed_out for r in results) else GoldStatus.UNRESOLVED
        return GoldFinding(task, status, "\n".join(lines))
    resolved = sum(result.passed for result in results)
    if resolved == 0:
        return GoldFinding(task, GoldStatus.UNRESOLVED, "\n".join(lines))
    if resolved < runs:
        return GoldFinding(task, GoldStatus.FLAKY, f"resolved in {resolved} of {runs} runs\n" + "\n".join(lines))
    if empty and (without := _empty_patch_resolves(task)):
        return GoldFinding(task, GoldStatus.TRIVIAL, "\n".join([*lines, without]))
    return GoldFinding(task, GoldStatus.RESOLVED, "\n".join(lines))


def _summary(result: ValidationResult) -> str:
    tally = result.tally
    if tally is None:
        return result.status
    return (
        f"{result.status}: FAIL_TO_PASS {tally.fail_to_pass_passed}/{tally.fail_to_pass_total}, "
        f"PASS_TO_PASS broken {tally.pass_to_pass_failed}"
        + (f" (applied with {result.apply_method})" if result.apply_method == "patch_fuzz" else "")
    )


def _empty_patch_resolves(task: TaskInstance) -> str:
    """What the task's tests say with its test patch alone, when that already resolves it
    ("" otherwise): a task whose FAIL_TO_PASS tests pass with no fix measures nothing."""
    if not task.repo or not task.fail_to_pass:
        return ""
    clone = ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
    environment = runtime_for(task)
    plan = test_plan(task, environment[1] if environment else None)
    with in_use(environment[0]) if environment else contextlib.nullcontext():
        run = run_tests_with(clone, task.base_commit, [task.test_patch], plan.command, _timeout(), plan)
    if run.apply_error or run.build_error or run.timed_out or run.environment_missing:
        return ""
    passed = passing_ids(plan.fail_to_pass, list(run.outcomes))
    if all(test in passed for test in plan.fail_to_pass):
        return "the empty patch resolves it too: every FAIL_TO_PASS test passes with no fix"
    return ""


def _timeout() -> float:
    return settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS


@transaction.atomic
def do_save_finding(finding: GoldFinding) -> None:
    task = TaskInstance.objects.select_for_update().get(pk=finding.task.pk)
    task.gold_status, task.gold_detail, task.gold_checked_at = finding.status, finding.detail, timezone.now()
    if finding.status in QUARANTINING:
        task.quarantined = True
        task.quarantine_reason = f"{GOLD_QUARANTINE}{GoldStatus(finding.status).label}: {finding.detail}"
    elif finding.status == GoldStatus.RESOLVED and task.quarantine_reason.startswith(GOLD_QUARANTINE):
        task.quarantined, task.quarantine_reason = False, ""
    task.save(update_fields=["gold_status", "gold_detail", "gold_checked_at", "quarantined", "quarantine_reason"])
