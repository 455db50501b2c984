"""The mock's reference book of a large question dataset: how long it takes to build, what it
holds in memory, and what finding a prompt's task in it costs.

A multiple-choice dataset of ``--tasks`` MMLU questions (the dev and val splits beside the
checkout, shared/data/mmlu, or where MMLU_DIR says, else tests/data/mmlu; repeated with a number after the question
until there are enough) is stored in a fresh database, then its book is built as a job
builds it (experiments/mock_books.py: one query, then the automaton) and every task's
default prompt is looked up in it, alone and with ``MAX_BOOKS`` books of as many tasks
registered (as a long-lived worker that ran other datasets keeps them).

    .venv/bin/python bench/mock_book.py [--tasks 10000]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import use_production_environment  # noqa: E402

# As tests/experiments/test_qa_runs.py finds them: beside the checkout, or where MMLU_DIR says.
SHARED_MMLU = Path(os.environ.get("MMLU_DIR", ROOT.parent / "shared" / "data" / "mmlu"))
LOCAL_MMLU = ROOT / "tests" / "data" / "mmlu"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=2000)
    args = parser.parse_args()
    use_production_environment()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return run_benchmark(args.tasks, args.lookups)


def mmlu_questions() -> list:
    from datasets.formats import FormatOptions
    from datasets.formats.mmlu import parse

    files = sorted(SHARED_MMLU.rglob("*.csv")) if SHARED_MMLU.is_dir() else sorted(LOCAL_MMLU.glob("*.csv"))
    return [task for path in files for task in parse(path.name, path.read_bytes(), FormatOptions())]


def stored_dataset(count: int):
    from datasets.models import Dataset, DatasetKind, TaskInstance
    from orgs.models import Organization

    questions = mmlu_questions()
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = Dataset.objects.create(org=org, name=f"book {time.time_ns()}", kind=DatasetKind.MULTIPLE_CHOICE)
    rows = []
    for index in range(count):
        parsed = questions[index % len(questions)]
        round_ = index // len(questions)
        rows.append(
            TaskInstance(
                dataset=dataset,
                external_id=f"{parsed.external_id}-{round_}",
                position=index,
                problem_statement=parsed.question + (f" ({round_})" if round_ else ""),
                payload=parsed.payload,
                category=parsed.category,
            )
        )
    TaskInstance.objects.bulk_create(rows, batch_size=2000)
    return dataset, len(questions)


def run_benchmark(count: int, lookups: int) -> int:
    from datasets.models import TaskInstance
    from evaluation.workloads import workload_for
    from experiments.mock_books import ReferenceTask, book_name, book_of, reference_book
    from providers.adapters.mock import mock_book

    dataset, distinct = stored_dataset(count)
    statements = TaskInstance.objects.filter(dataset=dataset).values_list("problem_statement", flat=True)
    mean = sum(map(len, statements)) / count
    print(f"{count} multiple-choice tasks ({distinct} distinct MMLU questions), {mean:.0f} characters a question")

    times = []
    for _ in range(3):
        gc.collect()
        started = time.perf_counter()
        book = reference_book(dataset)
        times.append(time.perf_counter() - started)
        del book
    gc.collect()
    tracemalloc.start()
    book = reference_book(dataset)
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    automaton = book._automaton.get_stats()
    print(f"build: best {min(times):.2f} s, worst {max(times):.2f} s of 3 (one query, then the automaton)")
    print(
        f"memory: {held / 2**20:.1f} MiB held once built (peak {peak / 2**20:.1f} MiB while building), "
        f"of which the automaton {automaton['total_size'] / 2**20:.1f} MiB ({automaton['nodes_count']:,} nodes)"
    )

    workload = workload_for(dataset.kind)
    tasks = list(TaskInstance.objects.filter(dataset=dataset).order_by("?")[:lookups])
    prompts = [workload.render_prompt(workload.default_prompt, task, lambda: "") for task in tasks]
    mock_book.forget_books()
    mock_book.register_book(book_name(dataset), book)
    print(f"look-up, one book: {_per_lookup_us(prompts, tasks, workload):.1f} µs per prompt")
    # Other datasets' books, as a long-lived worker keeps them: as large, none holding these tasks.
    others = [
        ReferenceTask(task.external_id, task.problem_statement[::-1], task.payload, "")
        for task in TaskInstance.objects.filter(dataset=dataset)
    ]
    for index in range(mock_book.MAX_BOOKS - 1):
        mock_book.register_book(("other", index), book_of(workload, others))
    mock_book.has_book(book_name(dataset))  # the run's own book is the one used last
    print(f"look-up, {mock_book.MAX_BOOKS} books: {_per_lookup_us(prompts, tasks, workload):.1f} µs per prompt")
    return 0


def _per_lookup_us(prompts: list[str], tasks: list, workload) -> float:
    from providers.adapters.mock import mock_book

    started = time.perf_counter()
    found = [mock_book.look_up(prompt) for prompt in prompts]
    elapsed = time.perf_counter() - started
    pairs = zip(found, tasks, strict=True)
    wrong = sum(entry is None or entry.right != workload.reference_output(task) for entry, task in pairs)
    assert not wrong, f"{wrong} prompts found the wrong task"
    return elapsed / len(prompts) * 1e6


if __name__ == "__main__":
    raise SystemExit(main())
