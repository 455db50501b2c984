"""Azure OpenAI through the real SDK (``openai.AzureOpenAI``) against a local server: the
parameters follow the model a deployment serves, as the credential's deployment list declares
it, and the credential's api-version; the price is the served model's."""

from __future__ import annotations

import io
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command

from datasets.models import Dataset
from experiments.actions import ArmSpec as ExperimentArm
from experiments.actions import do_replace_arms, unenforceable_budget_problems
from experiments.models import AttemptStatus, Experiment, ModelArm, RunArm
from providers import gateway
from providers.models import Price, ProviderCredential
from providers.policy import served_model
from providers.pricing import forget_catalog
from providers.registry import arm_errors
from providers.types import ArmSpec, CompletionRequest, Message
from tests.conftest import work_queue
from tests.providers.fake_server import FakeProvider, Reply

KEY = "azure-key-0123456789abcdef"
REQUEST = CompletionRequest(
    messages=(Message("user", "Fix the bug"),), max_output_tokens=64, temperature=0.0, top_p=0.9, stop=("END",)
)
FAST = {"max_retries": 0, "timeout_read_s": 5, "stream": False}
# The served model's name in Azure's answer is the model's, never the deployment's.
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "o3-2025-04-16",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 2000, "total_tokens": 3000},
}
DEPLOYMENTS = {"o3": "reasoner-prod", "gpt-4o": "chat-prod"}
SAMPLING = {"temperature", "top_p", "stop"}


@pytest.fixture
def azure(org):
    server = FakeProvider()
    server.responder = lambda seen: Reply(200, ANSWER)

    def make(api_version: str) -> FakeProvider:
        credential = ProviderCredential(
            org=org, provider="azure_openai", base_url=server.url, api_version=api_version, deployments=DEPLOYMENTS
        )
        credential.set_api_key(KEY)
        credential.save()
        return server

    yield make
    server.close()


def call(org, model: str, **config):
    return gateway.complete(org.pk, ArmSpec("azure_openai", model, FAST | config), REQUEST)


@pytest.mark.parametrize(
    "api_version, model, deployment, token_field, sampled",
    [
        # Before 2024-09-01-preview Azure knows max_tokens only.
        ("2024-06-01", "gpt-4o", "chat-prod", "max_tokens", True),
        ("2024-08-01-preview", "chat-prod", "chat-prod", "max_tokens", True),
        ("2024-09-01-preview", "gpt-4o", "chat-prod", "max_completion_tokens", True),
        ("2024-10-21", "chat-prod", "chat-prod", "max_completion_tokens", True),
        # An o-series deployment, named by its model or by itself: no sampling settings.
        ("2024-10-21", "o3", "reasoner-prod", "max_completion_tokens", False),
        ("2025-04-01-preview", "reasoner-prod", "reasoner-prod", "max_completion_tokens", False),
        ("preview", "reasoner-prod", "reasoner-prod", "max_completion_tokens", False),
    ],
)
def test_the_body_follows_the_served_model_and_the_api_version(
    azure, org, api_version, model, deployment, token_field, sampled
):
    fake = azure(api_version)
    completion = call(org, model)
    seen = fake.seen[-1]
    assert completion.text == "the answer"
    assert seen.path == f"/openai/deployments/{deployment}/chat/completions?api-version={api_version}"
    assert seen.body[token_field] == 64
    assert not ({"max_tokens", "max_completion_tokens"} - {token_field}) & set(seen.body)
    assert (set(seen.body) >= SAMPLING) if sampled else not (SAMPLING & set(seen.body))


def test_a_deployment_of_a_reasoning_model_takes_reasoning_effort(azure, org):
    fake = azure("2024-12-01-preview")
    assert arm_errors("azure_openai", "reasoner-prod", {"reasoning_effort": "high"}) == []
    call(org, "reasoner-prod", reasoning_effort="high")
    assert fake.seen[-1].body["reasoning_effort"] == "high"
    assert not SAMPLING & set(fake.seen[-1].body)


def test_an_openai_model_id_is_still_judged_at_save():
    errors = arm_errors("azure_openai", "gpt-4o", {"reasoning_effort": "high"})
    assert any("config.reasoning_effort applies to reasoning models only" in e for e in errors)


def test_the_price_is_the_served_models(azure, org):
    """The arm names the deployment; the catalog knows the model it serves."""
    forget_catalog()
    Price.objects.create(
        provider="azure_openai",
        model_pattern="o3",
        input_per_mtok=Decimal("3"),
        output_per_mtok=Decimal("11"),
        valid_from=date.today(),
        source="test",
    )
    azure("2024-10-21")
    completion = call(org, "reasoner-prod")
    # 1000 input tokens at $3/M and 2000 output at $11/M.
    assert completion.cost_usd == Decimal("0.025")
    assert served_model(org.pk, "azure_openai", "reasoner-prod") == "o3"
    assert served_model(org.pk, "azure_openai", "unlisted-deployment") == "unlisted-deployment"


def test_a_budget_holds_an_arm_that_names_a_deployment(azure, org):
    forget_catalog()
    Price.objects.create(
        provider="azure_openai",
        model_pattern="o3",
        input_per_mtok=Decimal("3"),
        output_per_mtok=Decimal("11"),
        valid_from=date.today(),
        source="test",
    )
    azure("2024-10-21")
    dataset = Dataset.objects.create(org=org, name="d")
    experiment = Experiment.objects.create(org=org, name="e", dataset=dataset)
    arm = ModelArm.objects.create(
        experiment=experiment, label="o3", provider="azure_openai", model_name="reasoner-prod"
    )
    unpriced = ModelArm(experiment=experiment, label="x", provider="azure_openai", model_name="unknown-deployment")
    problems = unenforceable_budget_problems(experiment, [arm, unpriced], Decimal("5"))
    assert len(problems) == 1 and "unknown-deployment" in problems[0]


def test_recompute_costs_prices_a_deployment_as_its_model(azure, org, experiment, start):
    """Attempts answered before the served model had a price are re-priced as that model."""
    do_replace_arms(experiment, [ExperimentArm("azure", "mock", "m", {"mode": "oracle"})])
    run = start(experiment, inference_only=True)
    work_queue()
    answered = run.attempts.filter(status=AttemptStatus.COMPLETED)
    assert answered.count() == 4 and set(answered.values_list("cost_usd", flat=True)) == {None}
    # The arm as it would be on Azure, naming its deployment.
    RunArm.objects.filter(run=run).update(provider="azure_openai", model_name="reasoner-prod")
    azure("2024-10-21")
    Price.objects.create(
        provider="azure_openai",
        model_pattern="o3",
        input_per_mtok=Decimal("3"),
        output_per_mtok=Decimal("11"),
        valid_from=date.today() - timedelta(days=1),
        source="test",
    )
    call_command("recompute_costs", "--run", str(run.code), stdout=io.StringIO())
    for attempt in answered:
        expected = (attempt.input_tokens * Decimal("3") + attempt.output_tokens * Decimal("11")) / 1_000_000
        assert attempt.cost_source == "catalog" and attempt.cost_usd == expected.quantize(attempt.cost_usd)
