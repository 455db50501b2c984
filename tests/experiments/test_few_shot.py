"""Built-in prompts by name@version, and few-shot prompts whose examples come from a dev split:
drawn per run seed and category, never an evaluated task, recorded on the run. A question kind
of this module's own stands in for the real ones, so only the prompt machinery is tested."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from datasets.models import Dataset, TaskInstance
from evaluation import workloads
from evaluation.workloads.base import ArtifactRow, Context, Evaluation, Workload
from evaluation.workloads.qa_exact import QaExact
from experiments.actions import SpecError, check_experiment_spec, do_save_experiment
from experiments.estimate import estimate_run
from experiments.models import Experiment
from tests.conftest import client_for, work_queue
from tests.forms import form_data


class Questions(Workload):
    kind = "qa_exact"
    label = QaExact.label
    words = QaExact.words
    builtin_prompts = {
        "plain@1": "Q: {{problem_statement}}",
        "few-shot@1": "Solved examples:\n{{examples}}\n\nNow: Q: {{problem_statement}}",
    }

    def reference_output(self, task):
        return task.payload["answer"]

    def distractors(self, task):
        return ("no idea",)

    def evaluate(self, task, output: str, context: Context) -> Evaluation:
        right = output.strip() == task.payload["answer"]
        return Evaluation(output, right, float(right), artifacts=(ArtifactRow("answer", json.dumps({"got": output})),))


@pytest.fixture(autouse=True)
def questions_kind(monkeypatch):
    monkeypatch.setitem(workloads.WORKLOADS, "qa_exact", f"{__name__}.Questions")
    workloads.workload_for.cache_clear()
    yield
    workloads.workload_for.cache_clear()


def questions(org, name, prefix, count=6):
    dataset = Dataset.objects.create(org=org, name=name, kind="qa_exact")
    TaskInstance.objects.bulk_create(
        TaskInstance(
            dataset=dataset,
            external_id=f"{prefix}-{i}",
            position=i,
            problem_statement=f"{prefix} question {i}?",
            payload={"answer": f"{prefix}-answer-{i}"},
            category="odd" if i % 2 else "even",
        )
        for i in range(count)
    )
    return dataset


ORACLE = [{"label": "oracle", "provider": "mock", "model_name": "m", "config": {"mode": "oracle"}}]


def spec(evaluated, **fields):
    return {"name": "quiz", "dataset": evaluated.name, "arms": ORACLE, **fields}


def prompts_of(run) -> dict[str, str]:
    return {a.task.external_id: a.request["messages"][0]["content"] for a in run.attempts.select_related("task")}


def test_a_few_shot_run_shows_examples_from_the_dev_split_of_the_tasks_category(org, alice, start):
    dev, evaluated = questions(org, "dev", "dev"), questions(org, "test", "test")
    raw = spec(evaluated, template="few-shot@1", few_shot={"dataset": "dev", "k": 2}, seed=4)
    experiment = do_save_experiment(org, check_experiment_spec(org, raw), alice)
    assert (experiment.prompt_builtin, experiment.few_shot_dataset, experiment.few_shot_k) == ("few-shot@1", dev, 2)
    run = start(experiment)
    work_queue()
    assert run.config_snapshot["few_shot"] == {"dataset_id": dev.pk, "dataset": "dev", "k": 2}
    assert run.config_snapshot["prompt_builtin"] == "few-shot@1"
    prompts = prompts_of(run)
    for external_id, prompt in prompts.items():
        shown = [line for line in prompt.splitlines() if line.startswith("dev question")]
        assert len(shown) == 2 and "test question" not in prompt.split("Now:")[0]
        parity = int(external_id.split("-")[1]) % 2
        assert all(int(line.split()[-1].rstrip("?")) % 2 == parity for line in shown), prompt  # same category
        assert prompt.endswith(f"Now: Q: test question {external_id.split('-')[1]}?")
    # Every task of a category sees the same examples; the answers were solved ones.
    assert prompts["test-0"].split("Now:")[0] == prompts["test-2"].split("Now:")[0]
    assert "dev-answer-" in prompts["test-0"]
    assert run.attempts.filter(resolved=True).count() == 6


def test_the_same_seed_draws_the_same_examples_and_another_may_not(org, alice, start):
    questions(org, "dev", "dev", count=20)
    evaluated = questions(org, "test", "test", count=2)
    draws = {}
    for seed in (1, 1, 2, 3):
        raw = spec(evaluated, name=f"quiz-{seed}-{len(draws)}", template="few-shot@1",
                   few_shot={"dataset": "dev", "k": 3}, seed=seed)  # fmt: skip
        run = start(do_save_experiment(org, check_experiment_spec(org, raw), alice))
        work_queue()
        draws.setdefault(seed, []).append(prompts_of(run)["test-0"])
    assert draws[1][0] == draws[1][1]
    assert len({draws[1][0], draws[2][0], draws[3][0]}) > 1


def test_the_estimate_counts_the_examples(org, alice):
    questions(org, "dev", "dev")
    evaluated = questions(org, "test", "test")
    plain = do_save_experiment(org, check_experiment_spec(org, spec(evaluated, template="plain@1")), alice)
    raw = spec(evaluated, name="few", template="few-shot@1", few_shot={"dataset": "dev", "k": 3})
    few = do_save_experiment(org, check_experiment_spec(org, raw), alice)
    assert estimate_run(few).arms[0].input_tokens > estimate_run(plain).arms[0].input_tokens


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"template": "cot@9"}, "template: 'cot@9' is not a built-in prompt for qa_exact (known: few-shot@1, plain@1)"),
        ({"template": "plain@1", "prompt_template": "{{problem_statement}}"}, "template: give a built-in template"),
        ({"template": "few-shot@1"}, "template: {{examples}} needs few_shot"),
        ({"template": "plain@1", "few_shot": {"dataset": "dev", "k": 2}}, "template: a few-shot experiment's prompt"),
        ({"template": "few-shot@1", "few_shot": {"dataset": "test", "k": 2}}, "few_shot.dataset: the examples must"),
        ({"template": "few-shot@1", "few_shot": {"dataset": "nope", "k": 2}}, "few_shot.dataset: must name one"),
        ({"template": "few-shot@1", "few_shot": {"dataset": "dev", "k": 0}}, "few_shot.k: must be a whole number"),
        ({"template": "few-shot@1", "few_shot": {"dataset": "dev"}}, "few_shot: must be a mapping"),
        ({"template": "few-shot@1", "few_shot": {"dataset": "patches", "k": 2}}, "few_shot.dataset: 'patches' holds"),
    ],
)
def test_prompt_choices_are_checked_by_name(org, dataset, fields, error):
    questions(org, "dev", "dev")
    evaluated = questions(org, "test", "test")
    Dataset.objects.filter(pk=dataset.pk).update(name="patches")
    with pytest.raises(SpecError) as refused:
        check_experiment_spec(org, spec(evaluated, **fields))
    assert any(message.startswith(error) for message in refused.value.messages), refused.value.messages


def test_another_organisations_dev_split_is_not_found(org, alice, charlie):
    from orgs.models import Organization

    other = Organization.objects.get(slug="other")
    questions(other, "dev", "dev")
    evaluated = questions(org, "test", "test")
    with pytest.raises(SpecError, match=r"few_shot\.dataset: must name one"):
        check_experiment_spec(org, spec(evaluated, template="few-shot@1", few_shot={"dataset": "dev", "k": 2}))


def test_the_form_takes_a_built_in_prompt_and_a_dev_split_by_the_same_rule(org, bob):
    dev, evaluated = questions(org, "dev", "dev"), questions(org, "test", "test")
    client = client_for(bob)
    arms = [{"label": "oracle", "provider": "mock", "model_name": "m", "config": {"mode": "oracle"}}]
    fields = {"prompt_builtin": "few-shot@1"}
    refused = client.post(reverse("experiments:create"), form_data(evaluated, arms, **fields))
    assert "template: {{examples}} needs few_shot" in refused.content.decode()
    fields |= {"few_shot_dataset": str(dev.pk), "few_shot_k": "2"}
    client.post(reverse("experiments:create"), form_data(evaluated, arms, **fields))
    experiment = Experiment.objects.get()
    assert experiment.prompt_template == Questions.builtin_prompts["few-shot@1"]
    assert (experiment.prompt_builtin, experiment.few_shot_dataset, experiment.few_shot_k) == ("few-shot@1", dev, 2)
