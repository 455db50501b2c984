"""A tiny question format registered only by tests, so the upload tests do not depend on the
question-answer parsers: one task per line, ``id<TAB>question<TAB>answer[<TAB>category]``,
read as ``qa_exact`` tasks whose kind (TinyWorkload) wants a non-empty answer."""

from __future__ import annotations

import pytest

from datasets.formats import FORMATS, FormatOptions, ParsedTask
from datasets.swebench import TaskFileRejected
from evaluation.workloads import WORKLOADS, workload_for
from evaluation.workloads.base import Workload
from evaluation.workloads.qa_exact import QaExact


class TinyWorkload(Workload):
    kind = "qa_exact"
    label = QaExact.label
    words = QaExact.words

    def payload_errors(self, payload: dict) -> list[str]:
        return [] if str(payload.get("answer", "")).strip() else ["answer: missing or empty"]


def parse(name: str, data: bytes, options: FormatOptions) -> list[ParsedTask]:
    tasks, problems = [], []
    question_field = options.field_map.get("question", "question")
    for number, line in enumerate(data.decode().splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 3:
            problems.append(f"{name}:{number}: field {question_field}: expected id, question and answer")
            continue
        task_id, question, answer, *rest = fields
        tasks.append(
            ParsedTask(
                line=number,
                external_id=task_id,
                kind=options.kind or "qa_exact",
                question=question,
                payload={"answer": answer},
                category=rest[0] if rest else "",
            )
        )
    if problems:
        raise TaskFileRejected(problems)
    return tasks


@pytest.fixture
def tiny_format(monkeypatch):
    monkeypatch.setitem(FORMATS, "tiny", "tests.datasets.tiny_format.parse")
    monkeypatch.setitem(WORKLOADS, "qa_exact", "tests.datasets.tiny_format.TinyWorkload")
    workload_for.cache_clear()
    yield "tiny"
    workload_for.cache_clear()
