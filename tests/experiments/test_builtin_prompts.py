"""The question kinds' built-in prompts through the real pipeline: MMLU five-shot with examples
from the dev split of the same subject, and a prompt asking for a confidence feeding the
calibration table."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from datasets.models import Dataset
from evaluation.workloads import workload_for, workload_kinds
from experiments.actions import check_experiment_spec, do_save_experiment
from experiments.models import Experiment
from leaderboards.breakdowns import calibration
from tests.conftest import client_for, work_queue
from tests.factories import import_file
from tests.forms import form_data
from tests.samples import MMLU

ORACLE = {"label": "oracle", "provider": "mock", "model_name": "m", "config": {"mode": "oracle"}}
NOISY = {"label": "noisy", "provider": "mock", "model_name": "n", "config": {"mode": "noisy", "quality": 0.5}}


@pytest.mark.parametrize("kind", workload_kinds())
def test_every_kinds_built_in_prompts_are_complete_and_plain_is_the_default_or_one_of_them(kind):
    workload = workload_for(kind)
    assert workload.builtin_prompts, kind
    assert workload.default_prompt in workload.builtin_prompts.values()
    for name, text in workload.builtin_prompts.items():
        assert re.fullmatch(r"[a-z-]+@\d+", name) and "{{problem_statement}}" in text
        assert ("{{examples}}" in text) == name.startswith("few-shot"), name


def test_mmlu_five_shot_draws_its_examples_from_the_subjects_dev_split(org, alice, start):
    import_file(org, "mmlu", MMLU / "world_religions_dev.csv", dataset="dev")
    import_file(org, "mmlu", MMLU / "high_school_biology_dev.csv", dataset="dev")
    import_file(org, "mmlu", MMLU / "elementary_mathematics_val.csv", dataset="val")
    dev_questions = set(Dataset.objects.get(org=org, name="dev").tasks.values_list("problem_statement", flat=True))
    raw = {"name": "5-shot", "dataset": "val", "arms": [ORACLE], "sample_size": 6, "template": "few-shot@1",
           "few_shot": {"dataset": "dev", "k": 5}, "seed": 2}  # fmt: skip
    run = start(do_save_experiment(org, check_experiment_spec(org, raw), alice))
    work_queue()
    assert run.attempts.filter(resolved=True).count() == 6
    for attempt in run.attempts.all():
        prompt = attempt.request["messages"][0]["content"]
        examples = prompt.split("{{")[0].split("\n\n" + attempt.task.problem_statement)[0]
        assert examples.count("Answer: ") == 5
        # No dev split has this subject: drawn from the whole split, never the evaluated question.
        assert attempt.task.problem_statement not in examples
        assert sum(question in examples for question in dev_questions) == 5


def test_a_prompt_asking_for_a_confidence_gives_the_calibration_table(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="algebra")
    raw = {"name": "sure?", "dataset": "algebra", "arms": [ORACLE, NOISY], "template": "confidence@1", "seed": 3}
    run = start(do_save_experiment(org, check_experiment_spec(org, raw), alice))
    work_queue()
    assert not run.attempts.filter(status="completed", confidence__isnull=True).exists()
    found = {row.arm: row for row in calibration(run)}
    assert set(found) == {"oracle", "noisy"} and found["oracle"].answers == 5
    assert found["noisy"].brier > found["oracle"].brier
    page = client_for(alice).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert 'id="calibration"' in page


def test_the_form_gives_a_question_dataset_its_kinds_prompt_not_the_pr_one(org, bob):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="algebra")
    dataset = Dataset.objects.get(org=org, name="algebra")
    client_for(bob).post(reverse("experiments:create"), form_data(dataset, [ORACLE], sample_strategy="random"))
    experiment = Experiment.objects.get()
    assert experiment.prompt_template == workload_for("multiple_choice").default_prompt
    assert "{{repository}}" not in experiment.prompt_template
