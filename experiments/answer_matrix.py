"""A run as a table of answers: its tasks as rows, its arms as columns, each cell the arm's
answers to the task (one per repetition, the first ``REPETITIONS_SHOWN``) and whether each
was right.

A page is read in two steps, each bounded by the page and never by the run: the page's tasks
(the dataset's, by id, after the cursor, each checked to be in the run through the (run,
task, arm, repetition) index that the "one attempt per cell" constraint keeps), then their
cells, one short range of that index per task and arm. So a page deep into a run of a
million attempts costs what the first one costs, however many repetitions it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Left

from datasets.models import TaskInstance
from evaluation.workloads.wording import ANSWER_CHARS, LABEL_CHARS, Said, Wording, short, task_label, wording_for
from experiments.models import Attempt, Run, RunArm
from experiments.reporting import REPETITIONS_SHOWN  # as a task's own page shows them

TASKS_PER_PAGE = 25
CELL_FIELDS = (
    "run",
    "code",
    "task",
    "arm",
    "repetition",
    "status",
    "outcome",
    "resolved",
    "error_category",
    "patch_present",
    "patch_applied",
    "task__code",
    "task__external_id",
    "task__title",
)


@dataclass(frozen=True)
class Cell:
    """One answer of an arm to a task: what it answered and its result."""

    code: Any  # the attempt's public id
    answer: str
    result: Said


@dataclass(frozen=True)
class MatrixRow:
    task_code: Any
    label: str
    expected: str
    cells: list[list[Cell]]  # per arm, in the columns' order: its answers, by repetition


@dataclass(frozen=True)
class AnswerMatrix:
    words: Wording
    arms: list[RunArm]
    rows: list[MatrixRow]
    previous_before: Any  # the previous page ends before this task (its code); None: first page
    next_after: Any  # the next page starts after this task; None: last page
    more_repetitions: int = 0  # repetitions of each cell not shown


def answer_matrix(run: Run, after: TaskInstance | None = None, before: TaskInstance | None = None) -> AnswerMatrix:
    """The page of the run's tasks after ``after`` (or before ``before``, or the first)."""
    words = wording_for(run.experiment.dataset.kind)
    arms = list(run.arms.order_by("position", "pk"))
    in_run = run.experiment.dataset.tasks.filter(Exists(run.attempts.filter(task=OuterRef("pk"))))
    if before is not None:
        tasks = list(in_run.filter(pk__lt=before.pk).order_by("-pk").values_list("pk", flat=True)[: TASKS_PER_PAGE + 1])
        if len(tasks) > TASKS_PER_PAGE:
            shown = tasks[TASKS_PER_PAGE - 1 :: -1]
            return _matrix(run, words, arms, shown, previous=True, following=True)
        after = None  # back at the start
    if after is not None:
        in_run = in_run.filter(pk__gt=after.pk)
    tasks = list(in_run.order_by("pk").values_list("pk", flat=True)[: TASKS_PER_PAGE + 1])
    return _matrix(run, words, arms, tasks[:TASKS_PER_PAGE], after is not None, len(tasks) > TASKS_PER_PAGE)


def _matrix(
    run: Run, words: Wording, arms: list[RunArm], task_ids: list[int], previous: bool, following: bool
) -> AnswerMatrix:
    repetitions = int(run.config_snapshot.get("repetitions") or 1)
    cells = (
        _cells(run)
        .filter(task_id__in=task_ids, arm_id__in=[arm.pk for arm in arms], repetition__lt=REPETITIONS_SHOWN)
        .order_by("task_id", "arm_id", "repetition")
    )
    by_task: dict[int, list[Attempt]] = {}
    for attempt in cells:
        by_task.setdefault(attempt.task_id, []).append(attempt)
    rows = [_row(words, arms, by_task[pk], run.inference_only) for pk in task_ids if pk in by_task]
    return AnswerMatrix(
        words,
        arms,
        rows,
        previous_before=rows[0].task_code if rows and previous else None,
        next_after=rows[-1].task_code if rows and following else None,
        more_repetitions=max(0, repetitions - REPETITIONS_SHOWN),
    )


def _cells(run: Run) -> QuerySet[Attempt]:
    return (
        run.attempts.select_related("task")
        .only(*CELL_FIELDS)
        .annotate(
            answer_start=Left("extracted_answer", ANSWER_CHARS + 1),
            question_start=Left("task__problem_statement", LABEL_CHARS * 3),
            expected_short=Left(KeyTextTransform("answer", "task__payload"), ANSWER_CHARS + 1),
        )
    )


def _row(words: Wording, arms: list[RunArm], attempts: list[Attempt], inference_only: bool) -> MatrixRow:
    task = attempts[0].task
    by_arm: dict[int, list[Cell]] = {arm.pk: [] for arm in arms}
    for attempt in attempts:
        if not words.expected_key:
            attempt.expected_short = ""  # type: ignore[attr-defined]
        answer = short(attempt.answer_start, 40) if words.short_answers else ""  # type: ignore[attr-defined]
        by_arm[attempt.arm_id].append(Cell(attempt.code, answer, words.result(attempt, inference_only)))
    return MatrixRow(
        task_code=task.code,
        label=task_label(words, task.external_id, task.title, attempts[0].question_start),  # type: ignore[attr-defined]
        expected=short(attempts[0].expected_short),  # type: ignore[attr-defined]
        cells=[by_arm[arm.pk] for arm in arms],
    )
