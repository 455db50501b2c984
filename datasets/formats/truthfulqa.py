"""TruthfulQA's ``TruthfulQA.csv`` (sylinrl/TruthfulQA): a header, then ``Type, Category,
Question, Best Answer, Correct Answers, Incorrect Answers, Source``, the answer lists
separated by ";".

Imported as multiple choice, MC1: the best answer among the incorrect ones, in an order
shuffled from the question's text (the same order on every import, and no position that is
always right). The payload keeps the best, correct and incorrect answers as published, so
the generation task (free text, judged) can be made from the same rows.

A task's id is a hash of its question (TruthfulQA's questions are its identity); the same
question twice is reported as a duplicate.
"""

from __future__ import annotations

import hashlib
import random

from datasets.formats import FormatOptions, ParsedTask
from datasets.formats.rows import (
    CATEGORY_MAX,
    QUESTION_MAX,
    Problems,
    csv_records,
    file_text,
    fixed_kind,
    label_field,
    no_tasks,
    refuse_duplicates,
    stable_id,
    text_field,
)
from datasets.swebench import TaskFileRejected
from evaluation.workloads.multiple_choice import LETTERS, MAX_CHOICES

COLUMNS = ("Type", "Category", "Question", "Best Answer", "Correct Answers", "Incorrect Answers", "Source")
REQUIRED = ("Question", "Best Answer", "Incorrect Answers")


def parse(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    fixed_kind(name, options, "multiple_choice")
    problems = Problems(name)
    records = csv_records(file_text(name, data), problems)
    _, header = next(records, (1, []))
    header = [column.strip() for column in header]
    if missing := [column for column in REQUIRED if column not in header]:
        raise TaskFileRejected([f"{name}:1: must be the header ({', '.join(COLUMNS)}); missing: {', '.join(missing)}"])
    tasks = []
    for line, record in records:
        if len(record) != len(header):
            problems.add(line, f"{len(record)} fields; the header has {len(header)}")
        elif task := _task(line, dict(zip(header, record, strict=True)), problems):
            tasks.append(task)
        if problems.full:
            break
    refuse_duplicates(tasks, problems, "the question")
    problems.check()
    if not tasks:
        raise no_tasks(name)
    return tasks


def _task(line: int, row: dict[str, str], problems: Problems) -> ParsedTask | None:
    before = len(problems.items)
    for column in REQUIRED:
        if not row[column].strip():
            problems.add(line, f"field {column}: empty")
    question = text_field(row["Question"], "Question", line, problems, limit=QUESTION_MAX)
    best = text_field(row["Best Answer"], "Best Answer", line, problems).strip()
    correct = _answers(row.get("Correct Answers", ""), "Correct Answers", line, problems)
    incorrect = _answers(row["Incorrect Answers"], "Incorrect Answers", line, problems)
    if best and best in incorrect:
        problems.add(line, "field Incorrect Answers: holds the best answer too")
    if len(incorrect) + 1 > MAX_CHOICES:
        problems.add(
            line, f"field Incorrect Answers: {len(incorrect)} answers; at most {MAX_CHOICES - 1} fit as options"
        )
    category = label_field(row.get("Category", ""), "Category", line, problems, CATEGORY_MAX)
    if len(problems.items) > before:
        return None
    choices = [best, *incorrect]
    # Seeded by the question, so each import shows the options in the same order.
    random.Random(hashlib.sha256(question.encode()).digest()).shuffle(choices)
    return ParsedTask(
        line=line,
        external_id=stable_id("truthfulqa", question),
        kind="multiple_choice",
        question=question,
        payload={
            "choices": choices,
            "answer": LETTERS[choices.index(best)],
            "best_answer": best,
            "correct_answers": correct,
            "incorrect_answers": incorrect,
        },
        category=category,
        title=" ".join(question.split())[:120],
        metadata={key: row[column] for key, column in (("type", "Type"), ("source", "Source")) if row.get(column)},
    )


def _answers(text: str, field: str, line: int, problems: Problems) -> list[str]:
    """A ";"-separated list as published, each answer once, in its order."""
    checked = text_field(text, field, line, problems, limit=QUESTION_MAX)
    return list(dict.fromkeys(answer.strip() for answer in checked.split(";") if answer.strip()))
