"""Task file formats for the question-answer kinds, by name (``import_tasks --format``).

A format's module has ``parse(name, data, options) -> list[ParsedTask]``: every line (or
row) checked before anything is written, and ``TaskFileRejected`` naming file, line and field
for each problem, so an import is all or nothing. SWE-bench's PR tasks have their own reader
(datasets/swebench.py). Adding a format is a module here and a line in ``FORMATS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.utils.module_loading import import_string

# format name -> "module.parse"
FORMATS: dict[str, str] = {
    "humaneval": "datasets.formats.humaneval.parse",
    "truthfulqa_gen": "datasets.formats.truthfulqa_gen.parse",
    "jeopardy": "datasets.formats.jeopardy.parse",
    "mmlu": "datasets.formats.mmlu.parse",
    "truthfulqa": "datasets.formats.truthfulqa.parse",
    "jsonl": "datasets.formats.generic.parse_jsonl",
    "csv": "datasets.formats.generic.parse_csv",
}


@dataclass(frozen=True)
class FormatOptions:
    """What the command line (or the upload form) adds to a file: a generic format's field
    mapping (``question=prompt,answer=target``), the kind its tasks are, the file's own name."""

    field_map: dict[str, str] = field(default_factory=dict)
    kind: str = ""


@dataclass(frozen=True)
class ParsedTask:
    """One task of a question-answer kind, checked and ready to save."""

    line: int  # where it was in the file (a line, or a CSV row counting the header as 1)
    external_id: str
    kind: str  # DatasetKind
    question: str  # the task's problem statement: what the prompt asks
    payload: dict[str, Any]  # the kind's own fields (evaluation/workloads/<kind>.py)
    category: str = ""
    difficulty: str = ""
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


Parser = Callable[[str, bytes, FormatOptions], list[ParsedTask]]


def format_names() -> list[str]:
    return ["swebench", *sorted(FORMATS)]


def parser_for(name: str) -> Parser:
    return import_string(FORMATS[name])
