"""TruthfulQA's generation task as published: ``TruthfulQA.csv`` with the columns ``Type,
Category, Question, Best Answer, Correct Answers, Incorrect Answers, Source`` (answers
separated by "; "), each row a free_text task judged by the evaluator against its answers.

A row's id is a hash of its question (the file has no ids, and row numbers shift when rows
are added). The best answer is one of the correct answers even where the file leaves it out
of that list, so the evaluator is shown the answer the oracle gives as a true one. Columns
beyond the seven (a later release's "Best Incorrect Answer") are ignored.
"""

from __future__ import annotations

import csv
import hashlib
import io
from typing import Any

from datasets.formats import FormatOptions, ParsedTask
from datasets.swebench import TaskFileRejected
from evaluation.workloads.free_text import normalised
from prbench.file_rows import MAX_REPORTED
from prbench.inputs import text_problem, utf8_problem

COLUMNS = ("Type", "Category", "Question", "Best Answer", "Correct Answers", "Incorrect Answers", "Source")
KIND = "free_text"
QUESTION_MAX = 10_000
FIELD_MAX = 20_000  # a row's answer lists; TruthfulQA's longest is about 1,500 characters
CATEGORY_MAX = 200  # TaskInstance.category's column
SEPARATOR = "; "


def parse(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    if options.kind and options.kind != KIND:
        raise TaskFileRejected([f"{name}: truthfulqa_gen tasks are {KIND}, not {options.kind}"])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TaskFileRejected([f"{name}:line {line}: {utf8_problem(data, exc)}"]) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    missing = [column for column in COLUMNS if column not in (header or [])]
    if missing:
        raise TaskFileRejected(
            [f"{name}:line 1: missing column(s) {', '.join(missing)} (expected {', '.join(COLUMNS)})"]
        )
    assert header is not None
    tasks: list[ParsedTask] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    line = reader.line_num + 1
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                task, row_problems = _task(line, header, row, seen)
                problems += [f"{name}:line {line}: {problem}" for problem in row_problems]
                if task:
                    tasks.append(task)
            if len(problems) >= MAX_REPORTED:
                problems.append(f"{name}: stopped after {MAX_REPORTED} problems")
                break
            line = reader.line_num + 1
    except csv.Error as exc:
        problems.append(f"{name}:line {line}: not valid CSV ({exc})")
    if problems:
        raise TaskFileRejected(problems)
    if not tasks:
        raise TaskFileRejected([f"{name}: no questions in the file"])
    return tasks


def _task(line: int, header: list[str], row: list[str], seen: dict[str, int]) -> tuple[ParsedTask | None, list[str]]:
    if len(row) != len(header):
        return None, [f"{len(row)} fields where the header has {len(header)}"]
    cells = dict(zip(header, row, strict=True))
    problems = [
        f"field {column}: {problem}"
        for column, limit in (("Question", QUESTION_MAX), ("Category", CATEGORY_MAX), *_answer_columns())
        if (problem := text_problem(cells[column], limit, multiline=column != "Category"))
    ]
    question = cells["Question"].strip()
    correct, incorrect = _answers(cells["Correct Answers"]), _answers(cells["Incorrect Answers"])
    best = cells["Best Answer"].strip()
    if not question:
        problems.append("field Question: is empty")
    if not correct and not best:
        problems.append("field Correct Answers: no answers (and no Best Answer)")
    if not incorrect:
        problems.append("field Incorrect Answers: no answers")
    key = normalised(question)
    if key in seen:
        problems.append(f"field Question: the same question as line {seen[key]}")
    seen.setdefault(key, line)
    if problems:
        return None, problems
    if best and normalised(best) not in {normalised(answer) for answer in correct}:
        correct.insert(0, best)
    payload: dict[str, Any] = {"correct_answers": correct, "incorrect_answers": incorrect, "best_answer": best}
    task = ParsedTask(
        line=line,
        external_id="tqa-" + hashlib.sha256(question.encode()).hexdigest()[:12],
        kind=KIND,
        question=question,
        payload=payload,
        category=cells["Category"].strip(),
        metadata={"type": cells["Type"].strip(), "source": cells["Source"].strip()},
    )
    return task, []


def _answer_columns() -> tuple[tuple[str, int], ...]:
    return (("Best Answer", FIELD_MAX), ("Correct Answers", FIELD_MAX), ("Incorrect Answers", FIELD_MAX))


def _answers(cell: str) -> list[str]:
    return [answer.strip() for answer in cell.split(SEPARATOR) if answer.strip()]
