"""The demo's question-answer experiments: loaded from the data shipped in the repository,
once (a second demo start adds nothing), with the mock arms the first screen compares."""

from experiments.demo import CODE_SAMPLE, DEMO_CODE_DATASET, load_code_experiment
from experiments.models import Dataset, DatasetKind


def test_the_humaneval_sample_is_loaded_once_with_three_mock_arms(org, alice):
    experiment = load_code_experiment(org, alice)
    again = load_code_experiment(org, alice)
    assert again.pk == experiment.pk
    dataset = Dataset.objects.get(org=org, name=DEMO_CODE_DATASET)
    assert dataset.kind == DatasetKind.CODE_EXEC and dataset.tasks.count() == CODE_SAMPLE
    assert sorted(dataset.tasks.values_list("external_id", flat=True))[:2] == ["HumanEval/0", "HumanEval/1"]
    assert [arm.label for arm in experiment.arms.all()] == ["oracle", "careful", "guesser"]
    assert experiment.repetitions == 2 and experiment.prompt_template.startswith("Complete the following")
