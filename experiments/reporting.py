"""What the run's pages and the API show of its tasks and attempts, beyond the boards (the
boards as text are leaderboards/reporting.py's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from datasets.models import TaskInstance
from evaluation.workloads import workload_for
from evaluation.workloads.wording import LETTERS, Wording, wording_for
from experiments.models import Artifact, Attempt, Run, RunArm

REPETITIONS_SHOWN = 10  # of each arm on a task's page

VERDICT_SCORES = ("status", "overall", "technical_quality", "correctness_confidence", "change_risk")


@dataclass
class TaskComparison:
    """One task of a run and every arm's attempts at it, each with its answer (a patch, a
    letter, a response, a function) and its result in the kind's words."""

    task: TaskInstance
    arms: list[tuple[RunArm, list[Attempt]]]
    words: Wording
    expected: str  # the right answer as a person reads it (not for a patch: its diff is shown)
    choices: list[tuple[str, str, bool]]  # a multiple-choice question's options: letter, text, right


def task_comparison(run: Run, task_code: Any) -> TaskComparison | None:
    """None when the task is not part of the run (an outsider guessing codes gets a 404)."""
    attempts = list(
        # A run of many samples per task shows the first ones (the attempts list has them all).
        run.attempts.filter(task__code=task_code, repetition__lt=REPETITIONS_SHOWN)
        .select_related("task", "arm")
        .defer("request", "raw_response", "output")
        .order_by("arm__position", "arm_id", "repetition")
    )
    if not attempts:
        return None
    task = attempts[0].task
    words = wording_for(run.experiment.dataset.kind)
    by_arm: dict[int, list[Attempt]] = {}
    for attempt in attempts:
        attempt.patch_text = attempt.extracted_answer if words.patches else ""  # type: ignore[attr-defined]
        attempt.answer_start = attempt.extracted_answer  # type: ignore[attr-defined]
        attempt.expected_short = words.short_expected(task.payload)  # type: ignore[attr-defined]
        attempt.answer_text = words.spelled_answer(task.payload, attempt.extracted_answer)  # type: ignore[attr-defined]
        attempt.result = words.result(attempt, run.inference_only)  # type: ignore[attr-defined]
        by_arm.setdefault(attempt.arm_id, []).append(attempt)
    return TaskComparison(
        task=task,
        arms=[(group[0].arm, group) for group in by_arm.values()],
        words=words,
        expected="" if words.patches else workload_for(words.kind).expected_answer(task),
        choices=_choices(task),
    )


def _choices(task: TaskInstance) -> list[tuple[str, str, bool]]:
    choices = task.payload.get("choices") if isinstance(task.payload, dict) else None
    if not isinstance(choices, list):
        return []
    right = task.payload.get("answer")
    return [(letter, str(text), letter == right) for letter, text in zip(LETTERS, choices, strict=False)]


def cache_source(attempt: Attempt) -> Attempt | None:
    """The attempt whose answer this one reused, when it is the same organisation's (a key
    includes the organisation, so it always is; the page links to it, so it is checked)."""
    if attempt.cached_from_id is None:
        return None
    sources = Attempt.objects.filter(pk=attempt.cached_from_id, run__org_id=attempt.run.org_id)
    return sources.select_related("run").only("code", "sequence", "run__code").first()


def verdict_scores(attempt: Attempt) -> list[dict]:
    """The evaluator's scores for the attempt, as plain values: its rationale stays in the
    admin, so it is never even handed to a customer page's template."""
    return [
        {"profile": str(verdict.profile), **{field: getattr(verdict, field) for field in VERDICT_SCORES}}
        for verdict in attempt.verdicts.select_related("profile").order_by("profile__name", "-profile__version")
    ]


def tests_with_roles(attempt: Attempt, artifact: Artifact | None) -> list[dict]:
    """Each test's outcome, marked with what the task asks of it: to be fixed
    (FAIL_TO_PASS), to keep passing (PASS_TO_PASS), or nothing."""
    tests = json.loads(artifact.content) if artifact else []
    roles = {test: "must fix" for test in attempt.task.fail_to_pass}
    roles.update({test: "must keep passing" for test in attempt.task.pass_to_pass})
    for test in tests:
        test["role"] = roles.get(test["id"], "")
    return tests
