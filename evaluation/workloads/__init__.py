"""The workload kinds, by name: adding one is a module here and a line in ``WORKLOADS``.

A kind's class declares all there is to the kind (its label, prompts, words, scoring), and
everything that lists kinds reads it from here: ``Dataset.kind``'s choices and ``DatasetKind``
(experiments/models.py) too, so a new kind needs no model change and no migration.
"""

from __future__ import annotations

from functools import cache

from django.utils.module_loading import import_string

from evaluation.workloads.base import Workload

# In the order forms and the API list them.
WORKLOADS = {
    "pr_patch": "evaluation.workloads.pr_patch.PrPatch",
    "qa_exact": "evaluation.workloads.qa_exact.QaExact",
    "multiple_choice": "evaluation.workloads.multiple_choice.MultipleChoice",
    "code_exec": "evaluation.workloads.code_exec.CodeExec",
    "free_text": "evaluation.workloads.free_text.FreeText",
}


def workload_kinds() -> list[str]:
    return list(WORKLOADS)


@cache
def workload_for(kind: str) -> Workload:
    """The kind's workload; ``KeyError`` for a kind with no module."""
    return import_string(WORKLOADS[kind])()


def kind_choices() -> list[tuple[str, str]]:
    """Every kind with its label, as ``Dataset.kind`` offers them: a callable, so the field's
    migration state does not change when a kind is added."""
    return [(kind, workload_for(kind).label) for kind in WORKLOADS]
