"""HumanEval as published: ``HumanEval.jsonl.gz`` (or the same lines uncompressed), one
problem per line with ``task_id, prompt, entry_point, canonical_solution, test``.

Each line becomes a ``code_exec`` task (evaluation/workloads/code_exec.py): its question is
the prompt, its payload the four fields. ``--map`` names a file's own field for one of
those (``--map canonical_solution=solution``) for files laid out as HumanEval but named
otherwise. Fields HumanEval does not have are kept in the task's metadata.
"""

from __future__ import annotations

import gzip
import io
import zlib
from typing import Any

from datasets.formats import FormatOptions, ParsedTask
from datasets.swebench import TaskFileRejected
from evaluation.workloads.code_exec import PAYLOAD_FIELDS, payload_errors
from prbench.file_rows import json_object_line, read_records
from prbench.inputs import NAME_MAX, text_problem

KIND = "code_exec"
FIELDS = ("task_id", *PAYLOAD_FIELDS)
GZIP_MAGIC = b"\x1f\x8b"
# HumanEval is 214 kB uncompressed; this bounds what a small gzip file can expand into.
UNCOMPRESSED_MAX_BYTES = 64 * 1024**2


def parse(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    """Every line checked, then all of them or none (``TaskFileRejected``)."""
    problems = _option_problems(name, options)
    if problems:
        raise TaskFileRejected(problems)
    text = _uncompressed(name, data)
    columns = {field: options.field_map.get(field, field) for field in FIELDS}
    numbered = ((number, line) for number, line in enumerate(text.split(b"\n"), start=1) if line.strip())
    return read_records(
        name,
        numbered,
        lambda number, line: _parse_line(number, line, columns),
        key=lambda task: task.external_id,
        key_field="task_id",
        rejected=TaskFileRejected,
    )


def _option_problems(name: str, options: FormatOptions) -> list[str]:
    problems = []
    if options.kind and options.kind != KIND:
        problems.append(f"{name}: HumanEval problems are {KIND} tasks, not {options.kind}")
    if unknown := sorted(set(options.field_map) - set(FIELDS)):
        problems.append(f"--map: {', '.join(unknown)}: not a HumanEval field (those are {', '.join(FIELDS)})")
    return problems


def _uncompressed(name: str, data: bytes) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by its first bytes, whatever its name)."""
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as archive:
            text = archive.read(UNCOMPRESSED_MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise TaskFileRejected([f"{name}: not a readable gzip file ({exc})"]) from None
    if len(text) > UNCOMPRESSED_MAX_BYTES:
        raise TaskFileRejected([f"{name}: larger than {UNCOMPRESSED_MAX_BYTES:,} bytes once uncompressed"])
    return text


def _parse_line(number: int, line: bytes, columns: dict[str, str]) -> tuple[ParsedTask | None, list[str]]:
    raw, errors = json_object_line(line)
    if raw is None:
        return None, errors
    errors = _missing(raw, columns)
    if errors:
        return None, errors
    task_id = raw[columns["task_id"]]
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    if problem := text_problem(task_id, NAME_MAX):
        return None, [f"field {columns['task_id']}: {problem}"]
    payload = {field: raw[columns[field]] for field in PAYLOAD_FIELDS}
    if errors := [f"field {_renamed(problem, columns)}" for problem in payload_errors(payload)]:
        return None, errors
    return _task(number, task_id, payload, raw, columns), []


def _missing(raw: dict, columns: dict[str, str]) -> list[str]:
    return [f"field {column}: missing" for column in columns.values() if column not in raw]


def _renamed(problem: str, columns: dict[str, str]) -> str:
    """A payload problem ("test: ...") under the file's own name for the field."""
    field, _, rest = problem.partition(":")
    return f"{columns.get(field, field)}:{rest}"


def _task(number: int, task_id: str, payload: dict, raw: dict, columns: dict[str, str]) -> ParsedTask:
    used = set(columns.values())
    metadata: dict[str, Any] = {key: value for key, value in raw.items() if key not in used}
    return ParsedTask(
        line=number,
        external_id=task_id,
        kind=KIND,
        question=payload["prompt"],
        payload=payload,
        title=payload["entry_point"],
        metadata=metadata,
    )
