"""The public Jeopardy! clue dataset's TSV (jwolle1/jeopardy_clue_dataset): a header line,
then one clue a line, tab-separated, with columns ``round, clue_value, daily_double_value,
category, comments, answer, question, air_date, notes``.

On the show the clue is the "answer" and the contestant's response the "question": so
``answer`` becomes the task's question (what the model is shown) and ``question`` the
expected response (``payload["answer"]``). Fields are not quoted: a quote inside one is
escaped with a backslash (``\\"``), as is a backslash itself, and both are undone here.

A task's id is a hash of its air date, round, category, value, clue and response (see
``rows.stable_id``): the file has no id column, and no combination of the other columns is
unique across seasons. Two identical rows are reported as duplicates.
"""

from __future__ import annotations

import re

from datasets.formats import FormatOptions, ParsedTask
from datasets.formats.rows import (
    CATEGORY_MAX,
    DIFFICULTY_MAX,
    QUESTION_MAX,
    Problems,
    file_text,
    fixed_kind,
    label_field,
    no_tasks,
    refuse_duplicates,
    stable_id,
    text_field,
)
from datasets.swebench import TaskFileRejected
from evaluation.workloads import workload_for
from evaluation.workloads.qa_exact import ANSWER_MAX

COLUMNS = (
    "round",
    "clue_value",
    "daily_double_value",
    "category",
    "comments",
    "answer",
    "question",
    "air_date",
    "notes",
)
REQUIRED = ("answer", "question")
METADATA = ("round", "clue_value", "daily_double_value", "comments", "air_date", "notes")
FINAL_ROUND = "3"
_ESCAPED = re.compile(r"\\([\"'\\])")
_MONEY = re.compile(r"^\$?[0-9][0-9,]*$")


def parse(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    fixed_kind(name, options, "qa_exact")
    problems = Problems(name)
    lines = file_text(name, data).splitlines()
    header = [column.strip().lower() for column in lines[0].split("\t")] if lines else []
    missing = [column for column in REQUIRED if column not in header]
    if missing:
        header_help = f"the header ({', '.join(COLUMNS)})"
        raise TaskFileRejected([f"{name}:1: must be {header_help}; missing: {', '.join(missing)}"])
    tasks = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(header):
            problems.add(number, f"{len(cells)} tab-separated fields; the header has {len(header)}")
        elif task := _task(number, dict(zip(header, map(_unescape, cells), strict=True)), problems):
            tasks.append(task)
        if problems.full:
            break
    refuse_duplicates(tasks, problems, "the same clue")
    problems.check()
    if not tasks:
        raise no_tasks(name)
    return tasks


def _unescape(cell: str) -> str:
    return _ESCAPED.sub(r"\1", cell.strip())


def _task(line: int, row: dict[str, str], problems: Problems) -> ParsedTask | None:
    before = len(problems.items)
    clue = text_field(row["answer"], "answer", line, problems, limit=QUESTION_MAX)
    response = text_field(row["question"], "question", line, problems, limit=ANSWER_MAX)
    for field in ("answer", "question"):
        if not row[field].strip():
            problems.add(line, f"field {field}: empty")
    if response.strip():
        problems_of_answer = workload_for("qa_exact").payload_errors({"answer": response})
        for problem in problems_of_answer:  # named as the file names it: the response is "question"
            problems.add(line, f"field question: {problem.partition(': ')[2]}")
    value = row.get("clue_value", "")
    if value and not _MONEY.match(value):
        problems.add(line, f"field clue_value: {value[:40]!r} is not an amount")
    category = label_field(row.get("category", ""), "category", line, problems, CATEGORY_MAX)
    if len(problems.items) > before:
        return None
    round_ = row.get("round", "")
    difficulty = "final" if round_ == FINAL_ROUND else value.replace("$", "").replace(",", "")
    metadata = {key: row[key] for key in METADATA if row.get(key)}
    return ParsedTask(
        line=line,
        external_id=stable_id("jeopardy", row.get("air_date", ""), round_, category, value, clue, response),
        kind="qa_exact",
        question=clue,
        payload={"answer": response},
        category=category,
        difficulty=label_field(difficulty, "clue_value", line, problems, DIFFICULTY_MAX),
        title=_title(category, difficulty),
        metadata=metadata,
    )


def _title(category: str, difficulty: str) -> str:
    """What the task lists show: "SCIENCE · $400", "SCIENCE · Final Jeopardy!"."""
    value = "Final Jeopardy!" if difficulty == "final" else f"${difficulty}" if difficulty else ""
    return " · ".join(part for part in (category, value) if part)
