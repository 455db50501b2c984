"""Question files of any shape: JSONL (one object a line) or CSV (a header, then one row a
task), with ``--kind qa_exact|multiple_choice`` and a field mapping
(``--map question=prompt,answer=target,category=topic``) from the kind's fields to the file's.
A field not mapped is looked for under its own name.

The kinds' fields:

- both: ``question`` (required), ``id`` (else a hash of the question and its answer, the same
  on every import), ``category``, ``difficulty``, ``title``.
- qa_exact: ``answer`` (required), ``aliases``: a JSON list, or answers separated by ";".
- multiple_choice: ``choices``, one field holding a list (in CSV, a JSON list), or several
  columns in order, ``--map choices=A|B|C|D`` (empty trailing ones dropped, so questions
  with fewer options can share the columns); ``answer``: the option's letter, its exact
  text, or (JSONL) its index counted from 0, as Hugging Face's copies of MMLU give it.

Whatever the mapping does not use is kept in the task's metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from datasets.formats import FormatOptions, ParsedTask
from datasets.formats.rows import (
    CATEGORY_MAX,
    DIFFICULTY_MAX,
    QUESTION_MAX,
    Problems,
    csv_records,
    file_text,
    label_field,
    no_tasks,
    refuse_duplicates,
    stable_id,
    text_field,
)
from datasets.swebench import TaskFileRejected
from evaluation.workloads import workload_for
from evaluation.workloads.multiple_choice import LETTERS
from prbench.inputs import JSONL_LINE_MAX_BYTES, NAME_MAX, JsonRejected, document_problems, parse_json, text_problem

COMMON = ("id", "question", "category", "difficulty", "title")
FIELDS = {
    "qa_exact": (*COMMON, "answer", "aliases"),
    "multiple_choice": (*COMMON, "choices", "answer"),
}
REQUIRED = {"qa_exact": ("question", "answer"), "multiple_choice": ("question", "choices", "answer")}
TITLE_MAX = 300  # TaskInstance.title's column


def parse_jsonl(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    kind, mapping = _mapping(name, options)
    problems = Problems(name)
    tasks = _tasks(kind, mapping, _jsonl_records(data, problems), problems, from_csv=False)
    return _checked(name, tasks, problems)


def parse_csv(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    kind, mapping = _mapping(name, options)
    problems = Problems(name)
    records = csv_records(file_text(name, data), problems)
    _, header = next(records, (1, []))
    header = [column.strip() for column in header]
    _check_header(name, kind, mapping, header, options)
    rows = _csv_rows(header, records, problems)
    return _checked(name, _tasks(kind, mapping, rows, problems, from_csv=True), problems)


def _checked(name: str, tasks: list[ParsedTask], problems: Problems) -> list[ParsedTask]:
    refuse_duplicates(tasks, problems, "id")
    problems.check()
    if not tasks:
        raise no_tasks(name)
    return tasks


# --- the mapping ----------------------------------------------------------------------------------


def _mapping(name: str, options: FormatOptions) -> tuple[str, dict[str, list[str]]]:
    """The kind, and for each of its fields the file's field (or, for choices, fields)."""
    kind = options.kind
    if kind not in FIELDS:
        given = f" ({kind!r} is not one)" if kind else ""
        raise TaskFileRejected([f"{name}: --kind must say what the tasks are: {' or '.join(FIELDS)}{given}"])
    errors = [
        f"--map: {ours!r} is not a field of {kind} tasks; they are {', '.join(FIELDS[kind])}"
        for ours in options.field_map
        if ours not in FIELDS[kind]
    ]
    mapping = {ours: [c.strip() for c in options.field_map.get(ours, ours).split("|")] for ours in FIELDS[kind]}
    errors += [
        f"--map: only choices takes several columns ({ours}={'|'.join(columns)})"
        for ours, columns in mapping.items()
        if len(columns) > 1 and ours != "choices"
    ]
    errors += [
        f"--map: {ours}={options.field_map[ours]!r} names an empty column" for ours in mapping if "" in mapping[ours]
    ]
    if errors:
        raise TaskFileRejected([f"{name}: {error}" for error in errors])
    return kind, mapping


def _check_header(
    name: str, kind: str, mapping: dict[str, list[str]], header: list[str], options: FormatOptions
) -> None:
    """Every column a required field, or an explicitly mapped one, reads is in the header."""
    problems = []
    if len(set(header)) != len(header):
        twice = sorted({column for column in header if header.count(column) > 1})
        problems.append(f"{name}:1: the header names {', '.join(map(repr, twice))} more than once")
    for ours, columns in mapping.items():
        if ours in REQUIRED[kind] or ours in options.field_map:
            missing = [column for column in columns if column not in header]
            if missing:
                problems.append(
                    f"{name}:1: no column {', '.join(map(repr, missing))} for {ours} "
                    f"(the columns are {', '.join(map(repr, header))}; map another with --map {ours}=COLUMN)"
                )
    if problems:
        raise TaskFileRejected(problems)


# --- records ---------------------------------------------------------------------------------------


def _jsonl_records(data: bytes, problems: Problems) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(data.split(b"\n"), start=1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")  # a byte order mark
        if not line.strip():
            continue
        if len(line) > JSONL_LINE_MAX_BYTES:
            problems.add(number, f"longer than {JSONL_LINE_MAX_BYTES:,} bytes")
            continue
        try:
            record = parse_json(line.decode("utf-8"))
        except UnicodeDecodeError:
            problems.add(number, "not valid UTF-8")
            continue
        except JsonRejected as exc:
            problems.add(number, f"not valid JSON: {exc}")
            continue
        if not isinstance(record, dict):
            problems.add(number, "each line must be a JSON object")
        elif unstorable := document_problems(record):
            for problem in unstorable:
                problems.add(number, f"field {problem}")
        else:
            yield number, record


def _csv_rows(
    header: list[str], records: Iterator[tuple[int, list[str]]], problems: Problems
) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, record in records:
        if len(record) != len(header):
            problems.add(line, f"{len(record)} fields; the header has {len(header)}")
        else:
            yield line, dict(zip(header, record, strict=True))


# --- tasks -----------------------------------------------------------------------------------------


def _tasks(
    kind: str,
    mapping: dict[str, list[str]],
    records: Iterator[tuple[int, dict[str, Any]]],
    problems: Problems,
    from_csv: bool,
) -> list[ParsedTask]:
    tasks = []
    for line, record in records:
        if task := _task(kind, mapping, line, record, problems, from_csv):
            tasks.append(task)
        if problems.full:
            break
    return tasks


def _task(
    kind: str, mapping: dict[str, list[str]], line: int, record: dict[str, Any], problems: Problems, from_csv: bool
) -> ParsedTask | None:
    before = len(problems.items)

    def one(ours: str) -> tuple[str, Any]:
        column = mapping[ours][0]
        return column, record.get(column)

    column, raw_question = one("question")
    question = _required_text(raw_question, column, line, problems, QUESTION_MAX)
    payload = (_qa_payload if kind == "qa_exact" else _choice_payload)(mapping, record, line, problems, from_csv)
    if payload is not None:
        for problem in workload_for(kind).payload_errors(payload):
            problems.add(line, f"field {_their_name(problem, mapping)}")
    labels = {
        ours: label_field(one(ours)[1], one(ours)[0], line, problems, limit)
        for ours, limit in (("category", CATEGORY_MAX), ("difficulty", DIFFICULTY_MAX), ("title", TITLE_MAX))
    }
    task_id = _task_id(kind, one("id"), question, payload, line, problems)
    if len(problems.items) > before or payload is None:
        return None
    used = {column for columns in mapping.values() for column in columns}
    return ParsedTask(
        line=line,
        external_id=task_id,
        kind=kind,
        question=question,
        payload=payload,
        category=labels["category"],
        difficulty=labels["difficulty"],
        title=labels["title"] or " ".join(question.split())[:120],
        metadata={key: value for key, value in record.items() if key not in used and value not in ("", None)},
    )


def _required_text(value: Any, column: str, line: int, problems: Problems, limit: int) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        problems.add(line, f"field {column}: missing or empty")
        return ""
    return text_field(value, column, line, problems, limit=limit)


def _task_id(kind: str, field: tuple[str, Any], question: str, payload: Any, line: int, problems: Problems) -> str:
    column, value = field
    if value in (None, ""):
        return stable_id(kind, question, json.dumps(payload, sort_keys=True))
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        problems.add(line, f"field {column}: an id must be text or a whole number")
        return ""
    if problem := text_problem(str(value), NAME_MAX):
        problems.add(line, f"field {column}: {problem}")
        return ""
    return str(value).strip()


def _qa_payload(
    mapping: dict[str, list[str]], record: dict[str, Any], line: int, problems: Problems, from_csv: bool
) -> dict | None:
    column = mapping["answer"][0]
    answer = _required_text(record.get(column), column, line, problems, QUESTION_MAX)
    aliases_column = mapping["aliases"][0]
    aliases = _text_list(record.get(aliases_column), aliases_column, line, problems, separator=";")
    if not answer or aliases is None:
        return None
    return {"answer": answer.strip(), "aliases": aliases} if aliases else {"answer": answer.strip()}


def _choice_payload(
    mapping: dict[str, list[str]], record: dict[str, Any], line: int, problems: Problems, from_csv: bool
) -> dict | None:
    columns = mapping["choices"]
    if len(columns) == 1:
        choices = _text_list(record.get(columns[0]), columns[0], line, problems, separator=None)
    else:
        choices = _columns_list(record, columns, line, problems)
    if not choices:
        if choices == []:
            problems.add(line, f"field {'|'.join(columns)}: no options")
        return None
    column = mapping["answer"][0]
    letter = _answer_letter(record.get(column), choices, from_csv)
    if letter is None:
        problems.add(
            line,
            f"field {column}: {str(record.get(column))[:40]!r} is neither a letter from A to "
            f"{LETTERS[min(len(choices), len(LETTERS)) - 1]} nor one option's text"
            + ("" if from_csv else " nor an index from 0"),
        )
        return None
    return {"choices": choices, "answer": letter}


def _text_list(value: Any, column: str, line: int, problems: Problems, separator: str | None) -> list[str] | None:
    """A list of texts: a list, or text holding a JSON list (or, with ``separator``, items
    separated by it); ``[]`` for nothing, None (with the problem added) for a wrong shape."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            try:
                value = parse_json(value)
            except JsonRejected as exc:
                problems.add(line, f"field {column}: not a JSON list ({exc})")
                return None
            if unstorable := document_problems(value, column):
                for problem in unstorable:
                    problems.add(line, f"field {problem}")
                return None
        elif separator:
            return [item.strip() for item in value.split(separator) if item.strip()]
        else:
            problems.add(line, f"field {column}: must be a list (or map several columns: --map {column}=A|B|C|D)")
            return None
    if not isinstance(value, list) or not all(isinstance(item, (str, int, float)) for item in value):
        problems.add(line, f"field {column}: must be a list of texts")
        return None
    return [str(item) for item in value]


def _columns_list(record: dict[str, Any], columns: list[str], line: int, problems: Problems) -> list[str] | None:
    values = [record.get(column) for column in columns]
    while values and values[-1] in (None, ""):
        values.pop()  # a question with fewer options than there are columns
    gaps = [column for column, value in zip(columns, values, strict=False) if value in (None, "")]
    if gaps:
        problems.add(line, f"field {gaps[0]}: empty, with options after it")
        return None
    wrong = [column for column, value in zip(columns, values, strict=False) if not isinstance(value, (str, int, float))]
    if wrong:
        problems.add(line, f"field {wrong[0]}: an option must be text")
        return None
    return [str(value) for value in values]


def _answer_letter(value: Any, choices: list[str], from_csv: bool) -> str | None:
    letters = LETTERS[: len(choices)]
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 1 and text.upper() in letters:
            return text.upper()
        matching = [letter for letter, choice in zip(letters, choices, strict=False) if choice.strip() == text]
        return matching[0] if len(matching) == 1 else None
    if not from_csv and isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(letters):
        return letters[value]
    return None


def _their_name(problem: str, mapping: dict[str, list[str]]) -> str:
    """A kind's problem ("choices[2]: ...") named by the file's field ("C: ...")."""
    head, _, rest = problem.partition(":")
    ours, _, index = head.partition("[")
    columns = mapping.get(ours)
    if not columns:
        return problem
    if index and len(columns) > 1 and int(index.rstrip("]")) < len(columns):
        return f"{columns[int(index.rstrip(']'))]}:{rest}"
    return f"{columns[0]}{'[' + index if index else ''}:{rest}"
