"""Prompts that fit the workload: templates kept with one kind of line ending, the form
pre-filled (and re-filled when the dataset changes) with the dataset kind's prompt, one check
for placeholders a kind cannot fill (form, spec, API, command, run start), and a prompt that
still holds one never sent."""

from __future__ import annotations

import html
import io
import json
import re

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from datasets.models import Dataset, TaskInstance
from evaluation.workloads.multiple_choice import DEFAULT_PROMPT as MMLU_PROMPT
from evaluation.workloads.pr_patch import DEFAULT_PROMPT as PULL_REQUEST_PROMPT
from evaluation.workloads.qa_exact import DEFAULT_PROMPT as JEOPARDY_PROMPT
from experiments.actions import (
    ArmSpec,
    ExperimentSpec,
    SpecError,
    check_experiment_spec,
    check_start_run,
    do_save_experiment,
)
from experiments.models import AttemptStatus, Experiment
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from providers.outcomes import OutcomeClass
from tests.conftest import api_client, client_for, make_api_key, work_queue
from tests.factories import import_file
from tests.forms import form_data
from tests.providers.fake_server import FakeProvider, Reply
from tests.samples import JEOPARDY, MMLU

ORACLE = {"label": "oracle", "provider": "mock", "model_name": "mock-oracle", "config": {"mode": "oracle"}}
UNFILLABLE = "{{repository}} cannot be filled for a qa_exact dataset"


def textarea_text(page) -> str:
    found = re.search(r'<textarea name="prompt_template"[^>]*>\n?(.*?)</textarea>', page.content.decode(), re.DOTALL)
    assert found, page.content.decode()[:500]
    return html.unescape(found.group(1))


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.fixture
def jeopardy(org):
    import_file(org, "jeopardy", JEOPARDY, dataset="jeopardy")
    return Dataset.objects.get(org=org, name="jeopardy")


@pytest.fixture
def mmlu(org):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    return Dataset.objects.get(org=org, name="mmlu")


def save_form(user, dataset, **fields):
    return client_for(user).post(reverse("experiments:create"), form_data(dataset, [ORACLE], **fields))


# --- line endings and the kind's own prompt -------------------------------------------------


def test_the_pull_request_prompt_a_browser_sends_back_unchanged_becomes_the_question_kinds(alice, jeopardy):
    """Browsers submit a textarea with CRLF: the form's pre-filled prompt, sent back as it was,
    must still be recognised as untouched."""
    response = save_form(alice, jeopardy, sample_strategy="first", prompt_template=crlf(PULL_REQUEST_PROMPT))
    assert response.status_code == 302
    assert Experiment.objects.get().prompt_template == JEOPARDY_PROMPT


def test_templates_are_stored_with_newlines_only(alice, jeopardy):
    mine = "Quiz time.\n\n{{problem_statement}}\n\nAnswer: What is ...?"
    assert save_form(alice, jeopardy, prompt_template=crlf(mine)).status_code == 302
    assert Experiment.objects.get().prompt_template == mine


def test_an_empty_template_means_the_kinds_default(alice, mmlu):
    assert save_form(alice, mmlu, prompt_template="").status_code == 302
    assert Experiment.objects.get().prompt_template == MMLU_PROMPT


def test_the_spec_stores_newlines_only_so_its_prompt_version_is_the_browsers(org, jeopardy):
    mine = "Quiz:\r\n{{problem_statement}}\r\n"
    spec = check_experiment_spec(org, {"name": "q", "dataset": "jeopardy", "prompt_template": mine, "arms": [ORACLE]})
    assert spec.prompt_template == "Quiz:\n{{problem_statement}}\n"


def test_the_new_experiment_form_starts_from_the_chosen_datasets_prompt(alice, jeopardy, mmlu):
    page = client_for(alice).get(reverse("experiments:create"), {"dataset": str(mmlu.code)})
    assert page.status_code == 200
    form = page.context["form"]
    assert (form.initial["dataset"], form.initial["prompt_template"]) == (mmlu.pk, MMLU_PROMPT)
    first = client_for(alice).get(reverse("experiments:create")).context["form"]
    chosen = Dataset.objects.get(pk=first.initial["dataset"])  # the first in the list
    assert first.initial["prompt_template"] != PULL_REQUEST_PROMPT or chosen.kind == "pr_patch"


def test_the_new_experiment_form_will_not_start_from_an_outsiders_dataset(alice, charlie, jeopardy):
    assert client_for(charlie).get(reverse("experiments:create"), {"dataset": str(jeopardy.code)}).status_code == 404


def test_choosing_another_dataset_swaps_an_untouched_prompt_for_its_kinds(alice, jeopardy, mmlu):
    """What htmx asks when the dataset select changes (the whole form is posted with it)."""
    url = reverse("experiments:prompt_for_dataset")
    page = client_for(alice).post(url, {"dataset": mmlu.pk, "prompt_template": crlf(JEOPARDY_PROMPT)})
    assert page.status_code == 200
    assert textarea_text(page) == MMLU_PROMPT
    assert 'id="prompt-template-field"' in page.content.decode()


def test_choosing_another_dataset_keeps_a_written_prompt_and_says_what_it_cannot_fill(alice, jeopardy):
    mine = "Files: {{repository}}\n\n{{problem_statement}}"
    page = client_for(alice).post(
        reverse("experiments:prompt_for_dataset"), {"dataset": jeopardy.pk, "prompt_template": mine}
    )
    assert page.status_code == 200
    assert textarea_text(page) == mine
    assert UNFILLABLE in page.content.decode()


def test_the_prompt_swap_answers_only_for_the_organisations_datasets(alice, bob, vera, charlie, jeopardy):
    url = reverse("experiments:prompt_for_dataset")
    assert client_for(charlie).post(url, {"dataset": jeopardy.pk}).status_code == 404
    assert client_for(alice).post(url, {"dataset": 999_999}).status_code == 404
    assert client_for(vera).post(url, {"dataset": jeopardy.pk}).status_code == 403
    assert client_for(bob).get(url).status_code == 405


def test_the_form_wires_the_swap_and_works_without_it(alice, jeopardy):
    page = client_for(alice).get(reverse("experiments:create")).content.decode()
    assert f'hx-post="{reverse("experiments:prompt_for_dataset")}"' in page
    assert 'hx-target="#prompt-template-field"' in page


# --- one check for placeholders a kind cannot fill ---------------------------------------------


def test_the_form_refuses_a_placeholder_the_datasets_kind_cannot_fill(alice, jeopardy):
    mine = "Files: {{repository}}\n\n{{problem_statement}}"
    page = save_form(alice, jeopardy, prompt_template=mine)
    assert page.status_code == 200
    assert UNFILLABLE in " ".join(page.context["form"].errors["prompt_template"])
    assert not Experiment.objects.exists()


@pytest.mark.parametrize(
    "template, problem",
    [
        ("{{repository}} {{problem_statement}}", UNFILLABLE),
        ("{{problem_statement}}\n{{choices}}", "{{choices}} cannot be filled for a qa_exact dataset"),
        ("{{ problem_statement }} {{problem_statement}}", "{{ problem_statement }} cannot be filled"),
        ("{{problem_statement}} {{problem_statment}", "has a {{ that opens no placeholder"),
    ],
)
def test_the_spec_refuses_what_the_kind_cannot_fill_naming_it_and_the_kind(org, jeopardy, template, problem):
    raw = {"name": "q", "dataset": "jeopardy", "prompt_template": template, "arms": [ORACLE]}
    with pytest.raises(SpecError) as refused:
        check_experiment_spec(org, raw)
    assert any(message.startswith("prompt_template: ") and problem in message for message in refused.value.messages)


def test_each_kind_fills_its_own_placeholders(org, dataset, jeopardy, mmlu):
    for name, template in [
        (dataset.name, PULL_REQUEST_PROMPT),
        ("mmlu", "{{problem_statement}}\n{{choices}}"),
        ("jeopardy", JEOPARDY_PROMPT),
    ]:
        raw = {"name": f"fits {name}", "dataset": name, "prompt_template": template, "arms": [ORACLE]}
        assert check_experiment_spec(org, raw).prompt_template == template


def test_the_api_refuses_it_with_a_422_naming_the_field(org, jeopardy):
    client = api_client(make_api_key(org))
    body = {"name": "q", "dataset": "jeopardy", "prompt_template": "{{repository}}\n{{problem_statement}}"}
    response = client.post("/api/experiments", json.dumps(body | {"arms": [ORACLE]}), content_type="application/json")
    assert response.status_code == 422, response.content
    assert UNFILLABLE in response.content.decode()
    assert not Experiment.objects.exists()


def test_the_command_refuses_it(org, jeopardy, tmp_path):
    spec = {"name": "q", "dataset": "jeopardy", "prompt_template": "{{repository}}\n{{problem_statement}}"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec | {"arms": [ORACLE]}))
    with pytest.raises(CommandError, match="cannot be filled for a qa_exact dataset"):
        call_command("apply_experiment", str(path), org="acme", stdout=io.StringIO())
    assert not Experiment.objects.exists()


def test_a_run_will_not_start_with_a_template_its_kind_cannot_fill(org, alice, jeopardy):
    experiment = do_save_experiment(org, ExperimentSpec(name="q", dataset=jeopardy, arms=[ArmSpec(**ORACLE)]))
    Experiment.objects.filter(pk=experiment.pk).update(prompt_template=PULL_REQUEST_PROMPT)  # saved before the check
    experiment.refresh_from_db()
    with pytest.raises(Exception) as refused:
        check_start_run(experiment)
    assert any(f"prompt template: {UNFILLABLE}" in message for message in refused.value.messages)
    page = client_for(alice).post(reverse("experiments:run_start", args=[experiment.code]), follow=True)
    assert UNFILLABLE in page.content.decode()
    assert not experiment.runs.exists()


# --- a prompt that would reach the model with a placeholder in it is never sent ---------------


def test_a_prompt_that_still_holds_a_placeholder_is_the_platforms_failure_before_any_call(org, jeopardy, start):
    provider = FakeProvider()
    provider.default = Reply(200, {"never": "asked"})
    try:
        credential = ProviderCredential(org=org, provider="openai", base_url=provider.url + "/v1")
        credential.set_api_key("sk-test-prompt-fit-0000")
        credential.save()
        arm = ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0})
        experiment = do_save_experiment(org, ExperimentSpec(name="q", dataset=jeopardy, arms=[arm], sample_size=3))
        run = start(experiment)
        # As a run started before the checks existed would hold it.
        run.config_snapshot = {**run.config_snapshot, "prompt_template": PULL_REQUEST_PROMPT}
        run.save(update_fields=["config_snapshot"])
        work_queue()
    finally:
        provider.close()
    assert provider.seen == []  # never sent, so never paid
    attempts = list(run.attempts.all())
    assert len(attempts) == 3
    for attempt in attempts:
        assert (attempt.status, attempt.error_category) == (AttemptStatus.FAILED, ErrorCategory.PLATFORM_ERROR)
        assert attempt.outcome == OutcomeClass.INFRASTRUCTURE_FAILURE  # never the model's
        assert UNFILLABLE in attempt.error_message
        assert attempt.cost_usd is None and attempt.resolved is None


def test_a_task_whose_own_text_holds_braces_is_asked_as_usual(org, jeopardy, start):
    """A bug report may quote a template ("{{ form.as_p }}"): that is the task's text, not a
    placeholder left unfilled."""
    TaskInstance.objects.filter(dataset=jeopardy).update(problem_statement="Django renders {{ form.as_p }} here")
    experiment = do_save_experiment(
        org, ExperimentSpec(name="q", dataset=jeopardy, arms=[ArmSpec(**ORACLE)], sample_size=2)
    )
    run = start(experiment)
    work_queue()
    assert set(run.attempts.values_list("status", flat=True)) == {AttemptStatus.COMPLETED}
    assert "{{ form.as_p }}" in run.attempts.first().request["messages"][0]["content"]


def test_the_migration_gives_question_experiments_saved_with_the_browsers_prompt_their_own(org, jeopardy, dataset):
    """Experiments saved from the browser before this fix hold the pull-request prompt with CRLF."""
    from django.apps import apps
    from django.utils.module_loading import import_string

    fit_templates = import_string("experiments.migrations.0038_prompt_templates_fit_their_kind.fit_templates")
    quiz = do_save_experiment(org, ExperimentSpec(name="quiz", dataset=jeopardy, arms=[ArmSpec(**ORACLE)]))
    patch = do_save_experiment(org, ExperimentSpec(name="patch", dataset=dataset, arms=[ArmSpec(**ORACLE)]))
    Experiment.objects.filter(pk__in=[quiz.pk, patch.pk]).update(prompt_template=crlf(PULL_REQUEST_PROMPT))
    fit_templates(apps, None)
    quiz.refresh_from_db(), patch.refresh_from_db()
    assert (quiz.prompt_template, patch.prompt_template) == (JEOPARDY_PROMPT, PULL_REQUEST_PROMPT)
