"""The demo's question-answer experiments: loaded from the data shipped in the repository,
once (a second demo start adds nothing), with the mock arms the first screen compares."""

from datasets.models import Dataset, DatasetKind, TaskInstance
from experiments.actions import sampled_task_ids
from experiments.demo import (
    CODE_SAMPLE,
    DEMO_CODE_DATASET,
    DEMO_JEOPARDY_DATASET,
    DEMO_MMLU_DATASET,
    load_code_experiment,
    load_jeopardy_experiment,
    load_mmlu_experiment,
)


def test_the_humaneval_sample_is_loaded_once_with_three_mock_arms(org, alice):
    experiment = load_code_experiment(org, alice)
    again = load_code_experiment(org, alice)
    assert again.pk == experiment.pk
    dataset = Dataset.objects.get(org=org, name=DEMO_CODE_DATASET)
    assert dataset.kind == DatasetKind.CODE_EXEC and dataset.tasks.count() == CODE_SAMPLE
    assert sorted(dataset.tasks.values_list("external_id", flat=True))[:2] == ["HumanEval/0", "HumanEval/1"]
    assert [arm.label for arm in experiment.arms.all()] == ["oracle", "careful", "guesser"]
    assert experiment.repetitions == 2 and experiment.prompt_template.startswith("Complete the following")


def test_the_mmlu_sample_is_loaded_once_and_sampled_by_subject(org, alice):
    experiment = load_mmlu_experiment(org, alice)
    assert load_mmlu_experiment(org, alice).pk == experiment.pk
    dataset = Dataset.objects.get(org=org, name=DEMO_MMLU_DATASET)
    assert dataset.kind == DatasetKind.MULTIPLE_CHOICE
    assert set(dataset.tasks.values_list("category", flat=True)) == {
        "abstract_algebra",
        "elementary_mathematics",
        "high_school_biology",
        "world_religions",
    }
    assert (experiment.sample_strategy, experiment.stratify_by, experiment.prompt_builtin) == (
        "stratified",
        "category",
        "confidence@1",
    )
    sampled = TaskInstance.objects.filter(pk__in=sampled_task_ids(experiment, experiment.sample_seed))
    # Equal allocation: five from each subject (each has at least five).
    assert sorted(sampled.values_list("category", flat=True)).count("world_religions") == 5


def test_the_jeopardy_sample_is_loaded_once_and_asked_with_its_kinds_prompt(org, alice):
    experiment = load_jeopardy_experiment(org, alice)
    assert load_jeopardy_experiment(org, alice).pk == experiment.pk
    dataset = Dataset.objects.get(org=org, name=DEMO_JEOPARDY_DATASET)
    assert dataset.kind == DatasetKind.QA_EXACT and dataset.tasks.count() == 10
    assert (experiment.grading, experiment.prompt_template.splitlines()[0]) == (
        "jeopardy",
        "This is a Jeopardy! clue. Give the correct response, phrased as a question.",
    )
