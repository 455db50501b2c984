"""Reading an uploaded file one record at a time (a JSONL line, a JSON entry), as task files
and predictions files are read: every record checked before anything is written, each
problem named with the file and the record's place, duplicates named with the place of the
first, and the file refused as a whole, on its first ``MAX_REPORTED`` problems.

The caller says how one record becomes an item (or the problems that stop it) and what
identifies an item; this module knows nothing of tasks or predictions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prbench.inputs import JSONL_LINE_MAX_BYTES, JsonRejected, document_problems, parse_json, utf8_problem

MAX_REPORTED = 20  # a broken file is refused on its first problems, not all of them

Item = TypeVar("Item")
Record = TypeVar("Record")


def read_records(
    name: str,
    records: Iterable[tuple[int, Record]],
    parse: Callable[[int, Record], tuple[Item | None, list[str]]],
    *,
    key: Callable[[Item], str],
    key_field: str,
    rejected: Callable[[list[str]], Exception],
    items: str = "tasks",
    place: str = "",
    duplicate_note: str = "",
    mismatch: Callable[[Item, Item], str] = lambda item, first: "",
) -> list[Item]:
    """The items of ``records`` (``(where, record)`` pairs, blank lines left out), or
    ``rejected(problems)``. A problem reads "name:{place}{where}: ...": ``place`` is "" for
    "file.jsonl:3", "line " or "entry " where the file says which. ``mismatch(item, first)``
    says what an item does not share with the file's first (one model in a predictions file),
    "" when nothing."""
    problems: list[str] = []
    parsed: list[Item] = []
    first_seen: dict[str, int] = {}
    for where, record in records:
        item, errors = parse(where, record)
        here = f"{name}:{place}{where}"
        problems += [f"{here}: {error}" for error in errors]
        if item is not None:
            if key(item) in first_seen:
                problems.append(
                    f"{here}: field {key_field}: {key(item)!r} already appears on {place or 'line '}"
                    f"{first_seen[key(item)]}{duplicate_note}"
                )
            elif parsed and (different := mismatch(item, parsed[0])):
                problems.append(f"{here}: {different}")
            first_seen.setdefault(key(item), where)
            parsed.append(item)
        if len(problems) >= MAX_REPORTED:
            problems.append(f"{name}: stopped after {MAX_REPORTED} problems")
            break
    if problems:
        raise rejected(problems)
    if not parsed:
        raise rejected([f"{name}: no {items} in the file"])
    return parsed


def json_object_line(line: str | bytes) -> tuple[dict[str, Any] | None, list[str]]:
    """One JSONL line as a JSON object fit to store, or the problems that stop it."""
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogatepass")
    if len(line.rstrip(b"\r\n")) > JSONL_LINE_MAX_BYTES:
        return None, [f"longer than {JSONL_LINE_MAX_BYTES:,} bytes"]
    try:
        raw = parse_json(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, [utf8_problem(line, exc)]
    except JsonRejected as exc:
        return None, [f"not valid JSON: {exc}"]
    if not isinstance(raw, dict):
        return None, ["each line must be a JSON object"]
    # NUL, lone surrogates, NaN anywhere (extra fields too): Postgres could not store them.
    if unstorable := document_problems(raw):
        return None, [f"field {problem}" for problem in unstorable]
    return raw, []
