"""The mock provider's reference books, filled from the datasets being run.

The mock answers from the prompt alone, as a model would: it looks the prompt up in the books
registered in its process (providers/adapters/mock/mock_book.py). A job registers its run's
dataset's book before its first mock call, on its own thread (pool threads must not touch
the database), once per process and dataset version: one query of the few fields a kind's
answers and keys are made of, never a task's repository files.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, NamedTuple

from datasets.models import Dataset, TaskInstance
from evaluation.workloads import workload_for
from evaluation.workloads.base import Workload
from providers.adapters.mock import mock_book
from providers.adapters.mock.adapter import MockAdapter


class ReferenceTask(NamedTuple):
    """What a kind reads of a task to answer it and to recognise it (no repository files).
    A plain tuple, not a row: a field missed here fails loudly instead of querying the
    database from a pool thread."""

    external_id: str
    problem_statement: str
    payload: Any
    gold_patch: str


def register_mock_books(datasets: Iterable[Dataset]) -> None:
    """The book of each dataset, registered unless this process has it already."""
    for dataset in {dataset.pk: dataset for dataset in datasets}.values():
        name = book_name(dataset)
        if not mock_book.has_book(name):
            mock_book.register_book(name, reference_book(dataset))


def register_books_for(attempts: Iterable[Any]) -> None:
    """The books of the datasets of those attempts (run, arm and task loaded) a mock arm answers."""
    register_mock_books(attempt.task.dataset for attempt in attempts if attempt.arm.provider == MockAdapter.name)


def book_name(dataset: Dataset) -> tuple[int, int]:
    # Tasks are never edited, only added, each import in a new version: a version's book
    # stays right for as long as the process lives.
    return (dataset.pk, dataset.version)


def reference_book(dataset: Dataset) -> mock_book.Book:
    rows = (
        TaskInstance.objects.filter(dataset_id=dataset.pk)
        .order_by("position", "pk")
        .values_list(*ReferenceTask._fields)
    )
    return book_of(workload_for(dataset.kind), (ReferenceTask(*row) for row in rows.iterator(chunk_size=2000)))


def book_of(workload: Workload, tasks: Iterable[Any]) -> mock_book.Book:
    return mock_book.Book(
        mock_book.Entry(
            workload.reference_keys(task),
            workload.reference_output(task),
            # Worked out when the mock first answers the task wrongly (see Entry).
            functools.partial(workload.distractors, task),
        )
        for task in tasks
    )
