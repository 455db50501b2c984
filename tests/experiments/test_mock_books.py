"""The mock's books, as the pipeline fills them: one query a dataset version, once a process,
only for runs with a mock arm, and nothing read from the database when the mock answers."""

import pytest

from datasets.models import Dataset
from evaluation.workloads import workload_for
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.mock_books import book_name, register_mock_books
from experiments.pipeline import RelatedCache
from providers.adapters.mock import mock_book
from tests.factories import import_file
from tests.samples import MMLU


@pytest.fixture
def mmlu(org) -> Dataset:
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    return Dataset.objects.get(org=org, name="mmlu")


def test_a_dataset_versions_book_is_read_in_one_query_once(mmlu, django_assert_num_queries):
    with django_assert_num_queries(1):
        register_mock_books([mmlu, mmlu])
    with django_assert_num_queries(0):
        register_mock_books([mmlu])
    mmlu.version += 1  # an import added tasks: a new version, a new book
    with django_assert_num_queries(1):
        register_mock_books([mmlu])
    assert mock_book.has_book(book_name(mmlu))


def test_the_mock_answers_and_errs_without_the_database(mmlu, django_assert_num_queries):
    """Pool threads must not query: what the mock reads of a task is in its book."""
    register_mock_books([mmlu])
    workload = workload_for("multiple_choice")
    tasks = list(mmlu.tasks.all())
    prompts = [workload.render_prompt(workload.default_prompt, task, lambda: "") for task in tasks]
    with django_assert_num_queries(0):
        entries = [mock_book.look_up(prompt) for prompt in prompts]
        wrong = [entry.wrong for entry in entries if entry]
    assert [entry.right if entry else None for entry in entries] == [workload.reference_output(t) for t in tasks]
    assert wrong == [workload.distractors(task) for task in tasks]


def test_a_job_registers_the_book_only_for_a_mock_arm(org, alice, mmlu):
    arms = [ArmSpec("mock", "mock", "m", {}), ArmSpec("gpt", "openai", "gpt-4o", {})]
    experiment = do_save_experiment(org, ExperimentSpec(name="q", dataset=mmlu, arms=arms, sample_size=2), alice)
    run = do_start_run(experiment)
    by_arm = {label: list(run.attempts.filter(arm__label=label)) for label in ("mock", "gpt")}
    RelatedCache().attach(by_arm["gpt"])
    assert not mock_book.has_book(book_name(mmlu))
    RelatedCache().attach(by_arm["mock"])
    assert mock_book.has_book(book_name(mmlu))
