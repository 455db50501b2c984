"""Each workload kind in its own words: how pages name a kind's questions, answers and verdicts.

The run page, its attempts list and boards, the task side-by-side page, the answers matrix,
the dataset and experiment pages and the HTML report all read a kind's ``Wording`` through
``wording_for``, so a multiple-choice run says "wrong: B, expected D" where a PR run says "did
not apply", and no page grows its own table of kinds. Each kind's ``Wording`` lives in its own
module (``Workload.words``), beside the rest of the kind; what several kinds share is here.
Plain values and pure functions: rows come in as any object with the attempt's columns (a model
instance, a row with annotations).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluation.workloads import workload_for

LABEL_CHARS = 48  # of a question's first words beside its task's id
ANSWER_CHARS = 60  # of an answer, or an expected one, in a list's cell
CELL_CHARS = 120  # of a question or a choice in a dataset page's cell
LETTERS = string.ascii_uppercase


@dataclass(frozen=True)
class Said:
    """What a page says of an attempt's result, and its tone (a CSS class: good, bad, or "")."""

    text: str
    tone: str = ""


@dataclass(frozen=True)
class TaskColumn:
    """A column of the dataset page for a kind: its heading and the cell of one task."""

    heading: str
    cell: Callable[[Any], str]
    code: bool = False  # shown as code (an entry point, an answer letter)
    num: bool = False


@dataclass(frozen=True)
class Wording:
    """How pages name one kind's things: the kind's ``Workload.words``, so a new kind comes
    with its words."""

    kind: str
    verdict: str  # one attempt's verdict, as a heading: "Resolved", "Correct", "Passed"
    rate: str  # a board's share of successes, as a short heading: "resolved", "right", "passed"
    question: str  # what a task asks, as a heading: "Problem statement", "Clue", "Question"
    answer: str  # what a model gives: "patch", "response", "answer", "completion"
    expected: str  # the right answer, as a heading: "Gold patch", "Expected answer"
    right: str  # a right answer, as a result: "resolved", "right", "passed"
    wrong: str  # a wrong one
    success: str  # what a task the arm got right was: "resolved", "answered right", "passed"
    right_filter: str  # the attempts list's filter for right answers: "right answers"
    wrong_filter: str
    per_success: str  # the cost board's cost per success: "Per resolved task", "Per right answer"
    not_graded: str  # why an inference-only run has no quality board
    # An attempt's result cell in the kind's words (see ``result``).
    said: Callable[[Wording, Any, bool], Said]
    # The payload key holding a short right answer to show beside a wrong one ("" for none:
    # a patch, a program, or answers only the evaluator weighs).
    expected_key: str = ""
    # Its answers are a few words (a letter, a response, a sentence), shown in a table's cell;
    # a patch or a program is shown by its result there.
    short_answers: bool = False
    # Where a task's label takes its words: "question" (the problem statement) or "title"
    # (an import's title: a PR's, a function's name, a question's start).
    label_from: str = "title"
    # The dataset page's columns for the kind; empty: the repository columns of PR tasks.
    task_columns: tuple[TaskColumn, ...] = ()

    @property
    def judged(self) -> bool:
        """The evaluator reviews its answers: pages show the evaluator's board and verdicts."""
        return workload_for(self.kind).judged_by_evaluator

    @property
    def patches(self) -> bool:
        """Its answers are patches: diffs, validation, the SWE-bench downloads."""
        return workload_for(self.kind).answers_are_patches

    def short_expected(self, payload: dict | None) -> str:
        """The task's right answer, short enough to stand beside a wrong one ("D", "the
        Nile"); "" for a kind whose right answer is no short text."""
        value = (payload or {}).get(self.expected_key) if self.expected_key else None
        return short(value) if isinstance(value, str) else ""

    def spelled_answer(self, payload: dict | None, answer: str) -> str:
        """An extracted answer as a person reads it: a letter with its option's text."""
        choices = (payload or {}).get("choices")
        if self.kind == "multiple_choice" and len(answer) == 1 and isinstance(choices, list):
            index = LETTERS.find(answer)
            if 0 <= index < len(choices):
                return f"{answer}. {choices[index]}"
        return answer

    def result(self, row: Any, inference_only: bool = False) -> Said:
        """The result cell of an attempt: its verdict in the kind's words, the error that
        ended it, or nothing while it waits. ``row`` has the attempt's status, resolved,
        error_category and outcome, and may carry ``answer_start`` (its extracted answer,
        cut) and ``expected_short`` (the task's short right answer)."""
        if row.status == "failed":
            return Said(row.error_category or "failed", "bad")
        if row.status != "completed":
            return Said("")
        return self.said(self, row, inference_only)


def short(text: str | None, limit: int = ANSWER_CHARS) -> str:
    """``text`` on one line, cut at a word with "…" when longer than ``limit``."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(",;:.") + "…"


def task_label(words: Wording, external_id: str, title: str = "", question: str = "") -> str:
    """A task's id with the first words of what it asks: "mmlu-42 · Which of the following is…"."""
    source = question if words.label_from == "question" else (title or question)
    first = short(source, LABEL_CHARS)
    return f"{external_id} · {first}" if first and first != external_id else external_id


def answer_of(row: Any) -> str:
    """The row's extracted answer, cut to a cell."""
    return short(getattr(row, "answer_start", "") or "")


def _expected_of(row: Any) -> str:
    return short(getattr(row, "expected_short", "") or "")


def quoted_answer(words: Wording, row: Any, inference_only: bool) -> Said:
    """A letter or a short response: "right: D", "wrong: B, expected D"."""
    answer, expected = answer_of(row), _expected_of(row)
    if row.resolved:
        return Said(f"{words.right}: {answer}" if answer else words.right, "good")
    if row.resolved is None:
        return Said(f"answered {answer}" if answer else f"no {words.answer} read")
    given = answer or f"no {words.answer} read"
    return Said(f"{words.wrong}: {given}, expected {expected}" if expected else f"{words.wrong}: {given}", "bad")


def right_or_wrong(kind: str, *, question: str, answer: str, expected: str, not_graded: str, **more: Any) -> Wording:
    """The words of a kind whose short answers are right or wrong (a response, a letter),
    graded against the task's ``answer``."""
    return Wording(
        kind=kind,
        verdict="Correct",
        rate="right",
        short_answers=True,
        question=question,
        answer=answer,
        expected=expected,
        right="right",
        wrong="wrong",
        success="answered right",
        right_filter="right answers",
        wrong_filter="wrong answers",
        per_success="Per right answer",
        not_graded=not_graded,
        said=quoted_answer,
        expected_key="answer",
        **more,
    )


# --- the dataset page's columns ------------------------------------------------------------------


def payload_of(task: Any, key: str) -> Any:
    return (task.payload or {}).get(key)


def question_cell(task: Any) -> str:
    return short(task.problem_statement, CELL_CHARS)


def _category(task: Any) -> str:
    return task.category


QUESTION_COLUMN = TaskColumn("Question", question_cell)
CATEGORY_COLUMN = TaskColumn("Category", _category)


def wording_for(kind: str) -> Wording:
    """The kind's words; ``KeyError`` for a kind with no module (as ``workload_for``)."""
    return workload_for(kind).words
