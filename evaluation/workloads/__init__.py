"""The workload kinds, by name: adding one is a module here and a line in ``WORKLOADS``."""

from __future__ import annotations

from functools import cache

from django.utils.module_loading import import_string

from evaluation.workloads.base import Workload

WORKLOADS = {
    "pr_patch": "evaluation.workloads.pr_patch.PrPatch",
    "code_exec": "evaluation.workloads.code_exec.CodeExec",
    "free_text": "evaluation.workloads.free_text.FreeText",
    "qa_exact": "evaluation.workloads.qa_exact.QaExact",
    "multiple_choice": "evaluation.workloads.multiple_choice.MultipleChoice",
}


def workload_kinds() -> list[str]:
    return list(WORKLOADS)


@cache
def workload_for(kind: str) -> Workload:
    """The kind's workload; ``KeyError`` for a kind with no module."""
    return import_string(WORKLOADS[kind])()
