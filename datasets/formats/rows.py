"""What the question formats share: reading a file's text and its CSV/TSV records with their
line numbers, checking a field's text, collecting problems as "file:line: field F: ...", and
task ids that stay the same from one import of a file to the next."""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator
from pathlib import PurePath

from datasets.formats import FormatOptions, ParsedTask
from datasets.swebench import TaskFileRejected
from prbench.file_rows import MAX_REPORTED
from prbench.inputs import NAME_MAX, storable_problem, text_problem, utf8_problem

QUESTION_MAX = 100_000  # a question with a long passage; the prompt template allows as much
CATEGORY_MAX = 200  # TaskInstance.category's column
DIFFICULTY_MAX = 50  # TaskInstance.difficulty's column
FIELD_MAX = 10_000  # an answer, an option, a note


class Problems:
    """A file's problems, each naming its line and field, stopped at ``MAX_REPORTED``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: list[str] = []

    def add(self, line: int | None, message: str) -> None:
        if len(self.items) < MAX_REPORTED:
            self.items.append(f"{self.name}:{line}: {message}" if line else f"{self.name}: {message}")
        elif len(self.items) == MAX_REPORTED:
            self.items.append(f"{self.name}: stopped after {MAX_REPORTED} problems")

    @property
    def full(self) -> bool:
        return len(self.items) > MAX_REPORTED

    def check(self) -> None:
        if self.items:
            raise TaskFileRejected(self.items)


def file_text(name: str, data: bytes) -> str:
    """The file as text (a UTF-8 byte order mark dropped), or the line that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TaskFileRejected([f"{name}:{line}: {utf8_problem(data, exc)}"]) from None


def csv_records(text: str, problems: Problems, **dialect) -> Iterator[tuple[int, list[str]]]:
    """Each record with the line it starts on (a quoted field may hold newlines). A record
    the csv module cannot read ends the file, since what follows it is misaligned."""
    reader = csv.reader(io.StringIO(text, newline=""), **dialect)
    start = 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.add(reader.line_num, f"not readable as CSV: {exc}")
            return
        if any(cell.strip() for cell in record):
            yield start, record
        start = reader.line_num + 1


def text_field(value: object, field: str, line: int, problems: Problems, *, limit: int = FIELD_MAX) -> str:
    """``value`` as text fit to store (``""`` if it is not, with the problem added). Content
    as published, as SWE-bench's problem statements are taken: only what the database cannot
    hold is refused (MMLU's val split has stray C1 control characters from a mis-decoding)."""
    if not isinstance(value, str):
        problem: str | None = f"must be text, not {type(value).__name__}"
    elif len(value) > limit:
        problem = f"is {len(value):,} characters long; at most {limit:,} are allowed"
    else:
        problem = storable_problem(value)
    if problem:
        problems.add(line, f"field {field}: {problem}")
        return ""
    assert isinstance(value, str)
    return value


def label_field(value: object, field: str, line: int, problems: Problems, limit: int) -> str:
    """A category or a difficulty: one line, within its column's size."""
    text = " ".join(str(value).split()) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
    if value not in (None, "") and not text:
        problems.add(line, f"field {field}: must be text or a number")
    elif problem := text_problem(text, limit):
        problems.add(line, f"field {field}: {problem}")
        return ""
    return text


def stable_id(prefix: str, *parts: str) -> str:
    """An id made of the task's content: the same row gets the same id in every import (so a
    re-import is refused as a duplicate), and rows can be added or reordered freely."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{prefix}-{digest}"[:NAME_MAX]


def file_stem(name: str) -> str:
    return PurePath(name).stem


def refuse_duplicates(tasks: list[ParsedTask], problems: Problems, what: str) -> None:
    """Two rows with the same id: the second is named, with the line of the first."""
    first: dict[str, int] = {}
    for task in tasks:
        if task.external_id in first:
            problems.add(task.line, f"{what} {task.external_id!r} already appears on line {first[task.external_id]}")
        first.setdefault(task.external_id, task.line)


def no_tasks(name: str) -> TaskFileRejected:
    return TaskFileRejected([f"{name}: no tasks in the file"])


def fixed_kind(name: str, options: FormatOptions, kind: str) -> None:
    """A published format has its own fields and kind: a field mapping or another kind given
    with it is a mistake to say, not to ignore."""
    if options.field_map:
        raise TaskFileRejected([f"{name}: --map is for jsonl and csv files; this format's fields are fixed"])
    if options.kind and options.kind != kind:
        raise TaskFileRejected([f"{name}: this format's tasks are {kind}, not {options.kind}"])
