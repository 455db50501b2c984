"""Reading SWE-bench task files (JSONL, one task instance per line).

Every line is checked before anything is written: a bad line is reported with its file,
line number and field, and the import is refused as a whole (see ``do_import_tasks``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluation.patches import PatchRejected, check_patch
from prbench.file_rows import json_object_line, read_records
from prbench.inputs import NAME_MAX, JsonRejected, document_problems, parse_json, text_problem

KNOWN_FIELDS = {
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
}
REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
VERSION_MAX = 50  # TaskInstance.version's column


@dataclass
class SwebenchTask:
    line: int
    instance_id: str
    repo: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    hints_text: str = ""
    version: str = ""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


class TaskFileRejected(Exception):
    """The file cannot be imported; ``problems`` say where and why, one per line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def parse_swebench(name: str, lines: Iterable[str | bytes]) -> list[SwebenchTask]:
    """``lines`` as read from the file: bytes are decoded here, so a line that is not UTF-8
    is reported with its number like any other bad line."""
    numbered = ((number, text) for number, text in enumerate(lines, start=1) if text.strip())
    return read_records(
        name,
        numbered,
        _parse_line,
        key=lambda task: task.instance_id,
        key_field="instance_id",
        rejected=TaskFileRejected,
    )


def _parse_line(number: int, line: str | bytes) -> tuple[SwebenchTask | None, list[str]]:
    raw, problems = json_object_line(line)
    if raw is None:
        return None, problems
    errors: list[str] = []
    values: dict[str, Any] = {
        "instance_id": _text(raw, "instance_id", errors, max_length=NAME_MAX, single_line=True),
        "repo": _text(raw, "repo", errors, max_length=NAME_MAX, pattern=REPO, shape="owner/name"),
        "base_commit": _text(raw, "base_commit", errors, pattern=COMMIT, shape="a hex commit id"),
        "patch": _patch(raw, "patch", errors, required=True),
        "test_patch": _patch(raw, "test_patch", errors, required=False),
        "problem_statement": _text(raw, "problem_statement", errors),
        "hints_text": _text(raw, "hints_text", errors, required=False),
        "version": _version(raw, errors),
        "fail_to_pass": _test_list(raw, "FAIL_TO_PASS", errors),
        "pass_to_pass": _test_list(raw, "PASS_TO_PASS", errors),
    }
    if errors:
        return None, errors
    metadata = {key: value for key, value in raw.items() if key not in KNOWN_FIELDS}
    return SwebenchTask(line=number, metadata=metadata, **values), []


def _text(
    raw: dict,
    name: str,
    errors: list[str],
    required: bool = True,
    max_length: int | None = None,
    pattern: re.Pattern | None = None,
    shape: str = "",
    single_line: bool = False,
) -> str:
    value = raw.get(name)
    if value is None or value == "":
        if required:
            errors.append(f"field {name}: missing or empty")
        return ""
    if not isinstance(value, str):
        errors.append(f"field {name}: must be a string, not {type(value).__name__}")
        return ""
    if required and not value.strip():
        errors.append(f"field {name}: blank (only whitespace)")
        return ""
    if max_length and len(value) > max_length:
        errors.append(f"field {name}: longer than {max_length} characters")
    elif single_line and (problem := text_problem(value, max_length or NAME_MAX)):
        errors.append(f"field {name}: {problem}")
    if pattern and not pattern.match(value):
        errors.append(f"field {name}: {value[:80]!r} is not {shape}")
    return value


def _patch(raw: dict, name: str, errors: list[str], required: bool) -> str:
    value = _text(raw, name, errors, required=required)
    if value:
        try:
            check_patch(value)
        except PatchRejected as exc:
            errors.append(f"field {name}: {exc}")
    return value


def _version(raw: dict, errors: list[str]) -> str:
    value = raw.get("version")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        errors.append(f"field version: must be a string or a number, not {type(value).__name__}")
        return ""
    if problem := text_problem(str(value), VERSION_MAX):
        errors.append(f"field version: {problem}")
        return ""
    return str(value)


def _test_list(raw: dict, name: str, errors: list[str]) -> list[str]:
    """A list of test ids, given as a list or (as SWE-bench ships it) a JSON string of one."""
    value = raw.get(name)
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except JsonRejected as exc:
            errors.append(f"field {name}: not a JSON list of test ids ({exc})")
            return []
        if unstorable := document_problems(value, name):
            errors += [f"field {problem}" for problem in unstorable]
            return []
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        errors.append(f"field {name}: must be a list of test ids (non-empty strings)")
        return []
    return value
