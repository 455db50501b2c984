"""The mock sees only what it is sent: through the real pipeline, for every workload kind, the
oracle arm answers every task right when the prompt carries it and none when it does not.

The wrong prompt is the one a browser once sent a question run: the pull-request prompt. It
is put in the run's snapshot directly, past the checks a template meets when it is saved (as
the browser's was), and without a placeholder left in it: a placeholder left in a rendered
prompt is the platform's error, caught before any call."""

import json

import pytest

from evaluation.models import EvaluatorProfile
from evaluation.workloads import workload_for
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import AttemptStatus, RunStatus
from providers.adapters.mock.adapter import DONT_KNOW
from providers.outcomes import OutcomeClass
from tests.conftest import work_queue
from tests.factories import import_as
from tests.samples import JEOPARDY, MMLU, PROBLEMS, TRUTHFULQA_GEN

WRONG_TEMPLATE = """You are fixing a bug in a small repository.

Reply with a unified diff (paths prefixed a/ and b/) in a ```diff fenced block that fixes
the problem. Do not change the tests."""
ORACLE = ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle", "max_concurrency": 64})
TASKS = 3


@pytest.fixture
def humaneval_file(tmp_path):
    path = tmp_path / "humaneval.jsonl"
    path.write_text("".join(json.dumps(problem) + "\n" for problem in PROBLEMS[:TASKS]))
    return path


@pytest.fixture
def free_text_profile(db):
    return EvaluatorProfile.objects.create(
        name="mock-fact-checker",
        workload="free_text",
        provider="mock",
        model_name="mock-evaluator",
        provider_config={"mode": "evaluator"},
    )


@pytest.fixture
def kind_dataset(request, org):
    """The dataset of the kind the test is parametrised with."""
    fixture = request.getfixturevalue
    return {
        "pr_patch": lambda: fixture("dataset"),
        "qa_exact": lambda: import_as(org, "jeopardy", JEOPARDY, "jeopardy"),
        "multiple_choice": lambda: import_as(org, "mmlu", MMLU / "abstract_algebra_dev.csv", "mmlu"),
        "code_exec": lambda: import_as(org, "humaneval", fixture("humaneval_file"), "humaneval"),
        "free_text": lambda: fixture("free_text_profile") and import_as(org, "truthfulqa_gen", TRUTHFULQA_GEN, "tqa"),
    }[request.param]()


def oracle_run(org, alice, start, django_capture_on_commit_callbacks, dataset, template: str | None = None):
    """An oracle run of ``TASKS`` tasks of ``dataset`` with the kind's own prompt, or with
    ``template`` put in its snapshot once started, worked to its end (a free-text run's
    evaluator jobs too)."""
    spec = ExperimentSpec(name=f"oracle {template is None}", dataset=dataset, arms=[ORACLE], sample_size=TASKS, seed=3)
    experiment = do_save_experiment(org, spec, alice)
    run = start(experiment)
    if template is not None:
        run.config_snapshot["prompt_template"] = template
        run.save(update_fields=["config_snapshot"])
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # the attempts; recording a judged kind's queues its evaluator jobs on commit
    work_queue()  # those evaluator jobs
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    attempts = run.attempts.all()
    assert attempts.count() == TASKS
    # Answered every time: a wrong prompt is the model's failure to answer, not an outage.
    assert set(attempts.values_list("status", "outcome")) == {(AttemptStatus.COMPLETED, OutcomeClass.SUCCESS)}
    return run


KINDS = ["pr_patch", "qa_exact", "multiple_choice", "code_exec", "free_text"]


@pytest.mark.parametrize("kind_dataset", KINDS, indirect=True)
def test_the_oracle_is_right_only_when_the_prompt_carries_the_task(
    org, alice, start, django_capture_on_commit_callbacks, kind_dataset
):
    right = oracle_run(org, alice, start, django_capture_on_commit_callbacks, kind_dataset)
    assert right.config_snapshot["prompt_template"] == workload_for(kind_dataset.kind).default_prompt
    assert set(right.attempts.values_list("resolved", "score")) == {(True, 1.0)}

    wrong = oracle_run(org, alice, start, django_capture_on_commit_callbacks, kind_dataset, WRONG_TEMPLATE)
    attempts = wrong.attempts.all()
    assert {attempt.request["messages"][0]["content"] for attempt in attempts} == {WRONG_TEMPLATE}
    assert set(attempts.values_list("output", flat=True)) == {DONT_KNOW}
    assert set(attempts.values_list("resolved", "score")) == {(False, 0.0)}
