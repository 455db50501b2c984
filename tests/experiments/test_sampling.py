"""Stratified samples through the experiment spec and a real run: seeded, recorded on the run,
the same seed giving the same tasks in the same order."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.actions import SpecError, check_experiment_spec, do_save_experiment, do_start_run, sampled_task_ids
from experiments.estimate import estimate_run
from experiments.models import Experiment
from tests.conftest import client_for
from tests.forms import form_data

ARMS = [{"label": "oracle", "provider": "mock", "model_name": "m", "config": {"mode": "oracle"}}]


@pytest.fixture
def categorised(dataset):
    """The demo dataset's 12 tasks in three categories: 6 'text', 4 'numbers', 2 'dates'."""
    tasks = list(dataset.tasks.order_by("position"))
    for task, category in zip(tasks, ["text"] * 6 + ["numbers"] * 4 + ["dates"] * 2, strict=True):
        task.category = category
        task.difficulty = "hard" if task.position % 2 else "easy"
        task.save(update_fields=["category", "difficulty"])
    return dataset


def spec(dataset, **fields):
    return {"name": "sampled", "dataset": dataset.name, "arms": ARMS, "sample_size": 6, **fields}


def categories_of(run) -> dict[str, int]:
    counts: dict[str, int] = {}
    for category in run.attempts.values_list("task__category", flat=True):
        counts[category] = counts.get(category, 0) + 1
    return counts


def test_a_stratified_run_samples_each_category_and_records_how(org, categorised, alice):
    raw = spec(categorised, sample_strategy="stratified", stratify_by="category", seed=5)
    experiment = do_save_experiment(org, check_experiment_spec(org, raw), alice)
    run = do_start_run(experiment)
    assert categories_of(run) == {"text": 3, "numbers": 2, "dates": 1}
    snapshot = run.config_snapshot
    assert (snapshot["sample_strategy"], snapshot["stratify_by"], snapshot["allocation"]) == (
        "stratified",
        "category",
        "proportional",
    )
    again = do_start_run(experiment)
    assert list(again.attempts.order_by("sequence").values_list("task_id", flat=True)) == list(
        run.attempts.order_by("sequence").values_list("task_id", flat=True)
    )
    # The estimate prices exactly the tasks a run would use.
    assert estimate_run(experiment).tasks == 6
    assert set(sampled_task_ids(experiment, 5)) == set(run.attempts.values_list("task_id", flat=True))


def test_equal_allocation_over_category_and_difficulty(org, categorised, alice):
    raw = spec(categorised, sample_strategy="stratified", stratify_by=["category", "difficulty"], allocation="equal")
    experiment = do_save_experiment(org, check_experiment_spec(org, raw), alice)
    assert experiment.stratify_by == "category,difficulty"
    run = do_start_run(experiment)
    # Six strata (3 categories x easy/hard), one task from each.
    strata = set(run.attempts.values_list("task__category", "task__difficulty"))
    assert len(strata) == 6 == run.attempts.count()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"sample_strategy": "stratified"}, "stratify_by: a stratified sample needs its strata"),
        ({"sample_strategy": "random", "stratify_by": "category"}, "stratify_by: only a stratified sample"),
        ({"sample_strategy": "stratified", "stratify_by": "colour"}, "stratify_by: 'colour' is not category"),
        ({"sample_strategy": "stratified", "stratify_by": 3}, "stratify_by: must be category, difficulty"),
        ({"sample_strategy": "stratified", "stratify_by": "category", "allocation": "fair"}, "allocation: must be"),
    ],
)
def test_bad_strata_are_refused_by_name(org, categorised, fields, error):
    with pytest.raises(SpecError) as refused:
        check_experiment_spec(org, spec(categorised, **fields))
    assert any(message.startswith(error) for message in refused.value.messages), refused.value.messages


def test_the_form_asks_for_strata_with_the_specs_rule(bob, categorised):
    client = client_for(bob)
    arms = [{"label": "oracle", "provider": "mock", "model_name": "m", "config": {"mode": "oracle"}}]
    refused = client.post(reverse("experiments:create"), form_data(categorised, arms, sample_strategy="stratified"))
    assert refused.status_code == 200
    assert "stratify_by: a stratified sample needs its strata" in refused.content.decode()
    assert not Experiment.objects.exists()
    fields = {"sample_strategy": "stratified", "stratify_by": "category", "allocation": "equal"}
    client.post(reverse("experiments:create"), form_data(categorised, arms, **fields))
    experiment = Experiment.objects.get()
    assert (experiment.stratify_by, experiment.allocation) == ("category", "equal")
