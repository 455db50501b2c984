"""MMLU's per-subject CSV files (hendrycks/test): no header, one question a record as
``question, A, B, C, D, answer letter``. The subject is the file's name less its split
(``abstract_algebra_dev.csv`` is "abstract_algebra", split "dev") and becomes the category.

A task's id is the file's name and the record's number (``abstract_algebra_dev-3``): the
published files do not change, and questions repeat across subjects, so their text could
not name them.
"""

from __future__ import annotations

import re

from datasets.formats import FormatOptions, ParsedTask
from datasets.formats.rows import (
    CATEGORY_MAX,
    QUESTION_MAX,
    Problems,
    csv_records,
    file_stem,
    file_text,
    fixed_kind,
    label_field,
    no_tasks,
    text_field,
)

OPTIONS = "ABCD"
_SPLIT = re.compile(r"^(?P<subject>.+?)_(?P<split>dev|val|test|train|auxiliary_train)$")


def parse(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    fixed_kind(name, options, "multiple_choice")
    problems = Problems(name)
    stem = file_stem(name)
    split = _SPLIT.match(stem)
    subject = split.group("subject") if split else stem
    category = label_field(subject, "subject (from the file name)", 0, problems, CATEGORY_MAX)
    tasks = []
    for number, (line, record) in enumerate(csv_records(file_text(name, data), problems), start=1):
        if task := _task(line, record, problems):
            tasks.append(
                ParsedTask(
                    line=line,
                    external_id=f"{stem}-{number}",
                    kind="multiple_choice",
                    question=task[0],
                    payload={"choices": task[1], "answer": task[2]},
                    category=category,
                    title=" ".join(task[0].split())[:120],
                    metadata={"subject": subject, "split": split.group("split") if split else ""},
                )
            )
        if problems.full:
            break
    problems.check()
    if not tasks:
        raise no_tasks(name)
    return tasks


def _task(line: int, record: list[str], problems: Problems) -> tuple[str, list[str], str] | None:
    if len(record) != 6:
        problems.add(line, f"{len(record)} fields; expected 6 (question, A, B, C, D, answer)")
        return None
    before = len(problems.items)
    question = text_field(record[0], "question", line, problems, limit=QUESTION_MAX)
    choices = [text_field(text, letter, line, problems) for letter, text in zip(OPTIONS, record[1:5], strict=True)]
    for field, raw in zip(("question", *OPTIONS), record[:5], strict=True):
        if not raw.strip():
            problems.add(line, f"field {field}: empty")
    answer = record[5].strip()
    if answer not in OPTIONS:
        problems.add(line, f"field answer: {answer[:20]!r} is not one of A, B, C, D")
    return None if len(problems.items) > before else (question, choices, answer)
