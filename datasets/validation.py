"""A patch validated against a task: in the task's own files, or in its repository at the base
commit with the task's test plan. Used by the pipeline (an arm's patch) and by validate_gold."""

from __future__ import annotations

import os
import threading

from django.conf import settings

from datasets.models import TaskInstance
from evaluation.log_parsers import log_parser_for
from evaluation.repositories import ensure_commit
from evaluation.validation import TestPlan, ValidationResult, validate_in_repository, validate_patch

# Validation runs the task's tests: CPU work, so more at once than there are cores only
# makes each slower (and nearer its wall-clock limit). Provider calls are not bounded by it.
_validation_slots = threading.BoundedSemaphore(os.cpu_count() or 1)


def validate_task(task: TaskInstance, patch: str) -> ValidationResult:
    """The patch validated against the task, at most one validation per core at a time."""
    timeout = settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS
    with _validation_slots:
        if not task.repo:
            return validate_patch(task.repo_files, patch, task.test_command, timeout)
        clone = ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
        return validate_in_repository(clone, task.base_commit, patch, test_plan(task), timeout)


def test_plan(task: TaskInstance) -> TestPlan:
    """How a repository task judges a patch: its own test command, or its dataset's."""
    dataset = task.dataset
    return TestPlan(
        command=task.test_command or dataset.test_command,
        test_patch=task.test_patch,
        fail_to_pass=tuple(task.fail_to_pass),
        pass_to_pass=tuple(task.pass_to_pass),
        build_command=tuple(dataset.build_command),
        harness_rule=dataset.harness_rule,
        log_parser=log_parser_for(task.repo, task.metadata),
    )
