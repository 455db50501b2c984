"""Whose failure a validation timeout is, judged against the task's gold patch through the
real pipeline and real validation: a patch whose tests hang where the gold's finish is the
model's (SWE-bench's harness counts it, unresolved, in the denominator); only a limit the
gold patch hits too is the harness's."""

from __future__ import annotations

import pytest

from datasets.models import GoldStatus
from evaluation.patches import check_patch
from experiments import pipeline
from experiments.actions import ArmSpec, do_replace_arms
from providers.outcomes import OutcomeClass
from tests.conftest import work_queue


def hang_while_unfixed(task) -> list[str]:
    """A test command that passes at once when the files the gold patch fixes have changed,
    and hangs while they are as they were (the bug still there), as a patch that loops for
    ever would: quick for the gold even on a loaded machine, so only the patch times out."""
    before = {path: task.repo_files[path] for path in check_patch(task.gold_patch).paths}
    code = (
        "import pathlib, sys, time\n"
        f"before = {before!r}\n"
        "if all(pathlib.Path(path).read_text() == text for path, text in before.items()):\n"
        "    time.sleep(60)\n"
    )
    return ["{python}", "-c", code]


HANG_ALWAYS = ["{python}", "-c", "import time; time.sleep(60)"]
ARMS = [
    ArmSpec("gold", "mock", "m", {"mode": "oracle"}),
    # Answers a patch that applies and changes nothing: the bug stays, so its tests hang.
    ArmSpec("hangs", "mock", "m", {"mode": "wrong"}),
]


@pytest.fixture
def one_task_run(experiment, start):
    def run_with(test_command, gold_status: str = ""):
        experiment.sample_size = 1
        experiment.save()
        do_replace_arms(experiment, ARMS)
        run = start(experiment)
        task = run.attempts.first().task
        task.test_command = test_command(task)
        task.gold_status = gold_status
        task.save()
        return run

    return run_with


@pytest.fixture
def validations(monkeypatch):
    """Every validation the pipeline runs, by patch: the real one, counted."""
    seen: list[str] = []
    real = pipeline.validate_task

    def counted(task, patch):
        seen.append(patch)
        return real(task, patch)

    monkeypatch.setattr(pipeline, "validate_task", counted)
    return seen


def outcomes(run) -> dict[str, tuple[str, bool | None, str]]:
    return {
        attempt.arm.label: (
            attempt.outcome,
            attempt.resolved,
            attempt.artifacts.get(kind="validation").status,
        )
        for attempt in run.attempts.select_related("arm")
    }


def test_a_patch_whose_tests_hang_where_the_gold_finishes_is_scored_against_the_model(one_task_run, settings):
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 3
    run = one_task_run(hang_while_unfixed)
    work_queue()
    assert outcomes(run) == {
        "gold": (OutcomeClass.SUCCESS, True, "passed"),
        # Answered, validated, timed out: unresolved and counted, not set aside.
        "hangs": (OutcomeClass.SUCCESS, False, "timed_out"),
    }
    hung = run.attempts.get(arm__label="hangs")
    assert hung.score == 0.0 and hung.patch_applied is True


def test_a_timeout_the_gold_also_hits_is_the_harnesss(one_task_run, settings, validations):
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 2
    run = one_task_run(lambda task: HANG_ALWAYS)
    work_queue()
    assert outcomes(run) == {
        "gold": (OutcomeClass.INFRASTRUCTURE_FAILURE, False, "timed_out"),
        "hangs": (OutcomeClass.INFRASTRUCTURE_FAILURE, False, "timed_out"),
    }
    gold_patch = run.attempts.first().task.gold_patch
    # Never checked: each timed-out patch had the gold validated beside it.
    assert sum(patch == gold_patch for patch in validations) == 3 and len(validations) == 4


def test_validate_golds_finding_decides_without_running_the_gold_again(one_task_run, settings, validations):
    """The gold finished inside the limit when validate_gold checked it: a timeout now is the
    patch's, and the gold is not run again to say so."""
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 2
    run = one_task_run(lambda task: HANG_ALWAYS, gold_status=GoldStatus.RESOLVED)
    work_queue()
    assert outcomes(run)["hangs"] == (OutcomeClass.SUCCESS, False, "timed_out")
    assert len(validations) == 2  # one per answer, none for the gold


def test_a_gold_that_could_not_be_checked_is_run_again(one_task_run, settings, validations):
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 2
    run = one_task_run(lambda task: HANG_ALWAYS, gold_status=GoldStatus.ERROR)
    work_queue()
    assert outcomes(run)["hangs"] == (OutcomeClass.INFRASTRUCTURE_FAILURE, False, "timed_out")
    assert len(validations) == 4


def test_without_a_gold_patch_a_timeout_is_the_patchs(dataset, validations):
    task = dataset.tasks.first()
    task.gold_patch = ""
    assert pipeline.gold_times_out(task) is False
    assert validations == []
