"""Question datasets through the real pipeline: the oracle arm answers every gold answer right
(MMLU's dev and val splits, and the Jeopardy and TruthfulQA samples), the wrong arm none, and
the experiment's grading mode reaches the run and its verdicts."""

import json
import os
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from datasets.models import Dataset
from experiments.actions import ArmSpec, ExperimentSpec, check_experiment_spec, do_save_experiment
from experiments.forms import ExperimentForm
from experiments.models import Artifact, ArtifactKind, AttemptStatus, RunStatus
from tests.conftest import work_queue
from tests.factories import import_file
from tests.samples import JEOPARDY, MMLU, TRUTHFULQA

# MMLU's dev and val splits beside the checkout (shared/data/mmlu), as on developers' machines
# and in CI, or where MMLU_DIR says; tests/data/mmlu holds four of its files for when it is not there.
SHARED_MMLU = Path(os.environ.get("MMLU_DIR", Path(__file__).resolve().parents[3] / "shared" / "data" / "mmlu"))
ORACLE = ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle", "max_concurrency": 256})
WRONG = ArmSpec("wrong", "mock", "mock-wrong", {"mode": "wrong", "max_concurrency": 256})


def run_dataset(org, alice, start, name, arms, **spec):
    dataset = Dataset.objects.get(org=org, name=name)
    experiment = do_save_experiment(org, ExperimentSpec(name=f"{name} run", dataset=dataset, arms=arms, **spec), alice)
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    return run


def assert_oracle_right_and_wrong_arm_wrong(run, tasks):
    attempts = run.attempts.all()
    assert attempts.count() == 2 * tasks
    assert attempts.filter(status=AttemptStatus.COMPLETED).count() == 2 * tasks
    oracle, wrong = attempts.filter(arm__label="oracle"), attempts.filter(arm__label="wrong")
    missed = list(oracle.exclude(resolved=True).values_list("task__external_id", flat=True))
    assert missed == [], f"the oracle missed {len(missed)}: {missed[:5]}"
    assert set(oracle.values_list("score", flat=True)) == {1.0}
    assert wrong.filter(resolved=False, score=0.0).count() == tasks
    assert Artifact.objects.filter(attempt__run=run, kind=ArtifactKind.ANSWER).count() == 2 * tasks


def test_mmlu_gold_answers_score_100_percent_with_the_oracle(org, alice, start):
    import_file(org, "mmlu", MMLU, dataset="mmlu")
    tasks = Dataset.objects.get(name="mmlu").tasks.count()
    run = run_dataset(org, alice, start, "mmlu", [ORACLE, WRONG])
    assert_oracle_right_and_wrong_arm_wrong(run, tasks)
    answer = Artifact.objects.filter(attempt__run=run, attempt__arm__label="oracle", kind=ArtifactKind.ANSWER).first()
    assert json.loads(answer.content)["how"] == "answer line"
    # The letter the kind read is kept on the attempt, beside the output it was read from.
    for attempt in run.attempts.filter(arm__label="oracle").select_related("task"):
        assert attempt.extracted_answer == attempt.task.payload["answer"]


@pytest.mark.skipif(not SHARED_MMLU.is_dir(), reason="MMLU's dev and val splits (shared/data/mmlu) are not here")
@pytest.mark.parametrize("split, expected", [("dev", 285), ("val", 1542)])
def test_the_real_mmlu_splits_score_100_percent_with_the_oracle(org, alice, start, split, expected):
    out = import_file(org, "mmlu", SHARED_MMLU / split, dataset=f"mmlu-{split}")
    assert f"{expected} task(s)" in out
    assert len(set(Dataset.objects.get(name=f"mmlu-{split}").tasks.values_list("category", flat=True))) == 57
    run = run_dataset(org, alice, start, f"mmlu-{split}", [ORACLE, WRONG])
    assert_oracle_right_and_wrong_arm_wrong(run, expected)


@pytest.mark.parametrize("grading", ["jeopardy", "strict", "lenient", "adaptive"])
def test_jeopardy_gold_answers_score_100_percent_in_every_grading_mode(org, alice, start, grading):
    import_file(org, "jeopardy", JEOPARDY, dataset="jeopardy")
    run = run_dataset(org, alice, start, "jeopardy", [ORACLE, WRONG], grading=grading)
    assert run.config_snapshot["grading"] == {"grading": grading}
    assert_oracle_right_and_wrong_arm_wrong(run, 10)
    verdicts = [json.loads(a.content) for a in Artifact.objects.filter(attempt__run=run, kind=ArtifactKind.ANSWER)]
    assert {verdict["mode"] for verdict in verdicts} == {grading}


def test_truthfulqa_gold_answers_score_100_percent_with_the_oracle(org, alice, start):
    import_file(org, "truthfulqa", TRUTHFULQA, dataset="truthfulqa")
    run = run_dataset(org, alice, start, "truthfulqa", [ORACLE, WRONG])
    assert_oracle_right_and_wrong_arm_wrong(run, 5)


def test_a_question_run_sends_the_options_and_never_the_answer(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    run = run_dataset(org, alice, start, "mmlu", [ORACLE], sample_size=1)
    attempt = run.attempts.get()
    prompt = attempt.request["messages"][0]["content"]
    assert "A. " in prompt and "D. " in prompt and 'end your reply with a line "Answer: X"' in prompt
    assert "reference_output" not in attempt.request and "distractors" not in attempt.request
    assert run.evaluator_profile_id is None  # multiple choice is graded by rule, not by the evaluator


# --- the grading mode in the experiment spec and form -----------------------------------------------


def spec(**fields):
    return {"name": "e", "dataset": "qa", "arms": [{"label": "o", "provider": "mock", "model_name": "m"}], **fields}


def test_the_spec_takes_a_grading_mode_of_the_datasets_kind(org, alice, start):
    import_file(org, "jeopardy", JEOPARDY)
    checked = check_experiment_spec(org, spec(grading="strict"))
    assert checked.grading == "strict"
    experiment = do_save_experiment(org, checked, alice)
    assert experiment.grading == "strict"
    assert start(experiment).config_snapshot["grading"] == {"grading": "strict"}
    # Left out, the kind's default is recorded: a run says how it was graded.
    experiment = do_save_experiment(org, check_experiment_spec(org, spec(name="default")), alice)
    assert experiment.grading == "jeopardy"
    with pytest.raises(ValidationError) as caught:
        check_experiment_spec(org, spec(grading="fuzzy"))
    assert caught.value.messages == ["grading: must be one of jeopardy, strict, lenient, adaptive"]


def test_a_kind_graded_one_way_refuses_a_grading_mode(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv")
    with pytest.raises(ValidationError) as caught:
        check_experiment_spec(org, spec(grading="strict"))
    assert caught.value.messages == ["grading: multiple_choice tasks are graded one way only; leave grading out"]
    experiment = do_save_experiment(org, check_experiment_spec(org, spec()), alice)
    assert experiment.grading == "" and start(experiment).config_snapshot["grading"] == {}


def test_the_experiment_form_offers_the_grading_modes_and_checks_them_against_the_dataset(org):
    import_file(org, "jeopardy", JEOPARDY, dataset="clues")
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    fields = {"name": "e", "sample_seed": 0, "repetitions": 1, "sample_strategy": "random"}
    fields["prompt_template"] = "{{problem_statement}}"
    form = ExperimentForm({**fields, "dataset": Dataset.objects.get(name="clues").pk, "grading": "lenient"}, org=org)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["grading"] == "lenient"
    assert ("adaptive", "adaptive") in form.fields["grading"].choices
    form = ExperimentForm({**fields, "dataset": Dataset.objects.get(name="mmlu").pk, "grading": "lenient"}, org=org)
    assert not form.is_valid()
    assert form.errors["grading"] == [
        "This dataset's grading multiple_choice tasks are graded one way only; leave grading out."
    ]
