"""A patch validated against a task: in the task's own files, or in its repository at the base
commit with the task's test plan. Used by the pipeline (an arm's patch) and by validate_gold."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Iterator

from django.conf import settings

from datasets.environments import environment_of, recipe_for
from datasets.models import TaskInstance
from datasets.swebench_specs import DIFF_TARGET, test_directives
from evaluation.agent_tools import Workspace, workspace
from evaluation.environments import EnvironmentUnavailable, Runtime, in_use, runtime
from evaluation.log_parsers import log_parser_for
from evaluation.repositories import checkout, ensure_commit
from evaluation.validation import (
    TestPlan,
    ValidationResult,
    unpatched_build_failure,
    validate_in_repository,
    validate_patch,
    written_files,
)

# Validation runs the task's tests: CPU work, so more at once than there are cores only
# makes each slower (and nearer its wall-clock limit). Provider calls are not bounded by it.
_validation_slots = threading.BoundedSemaphore(os.cpu_count() or 1)


def validate_task(task: TaskInstance, patch: str) -> ValidationResult:
    """The patch validated against the task, at most one validation per core at a time, in
    the task's environment (built first if this worker has none: see datasets/environments.py,
    which raises EnvironmentUnavailable when it cannot be had)."""
    timeout = settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS
    if not task.repo:
        with _validation_slots:
            return validate_patch(task.repo_files, patch, task.test_command, timeout)
    clone = ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
    environment = environment_of(task)  # outside the slots: a first build may take minutes
    with _validation_slots, in_use(environment[0]) if environment else contextlib.nullcontext():
        if environment and runtime(environment[0]) is None:
            raise EnvironmentUnavailable(f"environment {environment[0][:12]} was removed from this worker's cache")
        plan = test_plan(task, environment[1] if environment else None)
        result = validate_in_repository(clone, task.base_commit, patch, plan, timeout)
        # The unpatched tree built when the environment was made; if it does not build here
        # either, the sandbox lacks something the build had: not the patch's failure.
        if result.checkout_build_failed and (why := unpatched_build_failure(clone, task.base_commit, plan, timeout)):
            key = environment[0] if environment else ""
            raise EnvironmentUnavailable(
                f"environment {key[:12]}: its checkout build fails without any patch too, in the sandbox "
                f"(the platform's failure, not the patch's):\n{why[-2000:]}"
            )
        return result


@contextlib.contextmanager
def agent_workspace(task: TaskInstance, output_cap: int, tool_set: str = "all") -> Iterator[Workspace]:
    """A working copy of the task for an agent's tools (evaluation/agent_tools.py), as
    validate_task would check one out: a repository task at its base commit in its
    environment, a self-contained task's files; its test command with the validation's time
    limit. Never the task's hidden tests: no test patch, no FAIL_TO_PASS ids, and the command
    without the test files the test patch names. Its test runs share the validation slots."""
    timeout = settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS
    if not task.repo:
        plan = TestPlan(list(task.test_command))
        with workspace(written_files(task.repo_files), plan, timeout, output_cap, tool_set, _validation_slots) as ws:
            yield ws
        return
    clone = ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
    environment = environment_of(task)
    with in_use(environment[0]) if environment else contextlib.nullcontext():
        if environment and runtime(environment[0]) is None:
            raise EnvironmentUnavailable(f"environment {environment[0][:12]} was removed from this worker's cache")
        plan = _without_hidden_tests(task, test_plan(task, environment[1] if environment else None))
        with workspace(checkout(clone, task.base_commit), plan, timeout, output_cap, tool_set, _validation_slots) as ws:
            yield ws


def _without_hidden_tests(task: TaskInstance, plan: TestPlan) -> TestPlan:
    """The plan an agent may run: the task's tests are what its answer is judged by, unseen."""
    hidden = {*test_directives(task.repo, task.test_patch), *DIFF_TARGET.findall(task.test_patch)}
    command = [argument for argument in plan.command if argument not in hidden]
    return dataclasses.replace(plan, command=command, test_patch="", fail_to_pass=(), pass_to_pass=())


def test_plan(task: TaskInstance, environment: Runtime | None = None) -> TestPlan:
    """How a repository task judges a patch: its own test command, else its recipe's, else
    its dataset's; in ``environment`` when it has one."""
    dataset = task.dataset
    recipe = recipe_for(task) if not task.test_command else None
    return TestPlan(
        command=task.test_command or (recipe.test_command if recipe else []) or dataset.test_command,
        environment=environment,
        test_patch=task.test_patch,
        fail_to_pass=tuple(task.fail_to_pass),
        pass_to_pass=tuple(task.pass_to_pass),
        build_command=tuple(dataset.build_command),
        harness_rule=dataset.harness_rule,
        log_parser=log_parser_for(task.repo, task.metadata),
    )
