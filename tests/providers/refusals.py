"""A local server that refuses what each provider itself refuses (OpenAI: ``max_tokens`` on its
current models, sampling settings on reasoning models; Anthropic: a temperature with extended
thinking, a thinking budget not below ``max_tokens``), with the provider's own error bodies."""

from __future__ import annotations

from orgs.models import Organization
from providers import gateway
from providers.models import ProviderCredential
from providers.types import ArmSpec, CompletionRequest, Message
from tests.providers.contracts import FAST, KEY
from tests.providers.fake_server import Reply, Seen

REQUEST = CompletionRequest(
    messages=(Message("user", "Fix the bug"),),
    system="You write patches.",
    max_output_tokens=64,
    temperature=0.0,
    top_p=0.9,
    stop=("END",),
)


# OpenAI's answer to max_tokens on a current model, as the API sends it.
MAX_TOKENS_REFUSED = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


def openai_refusal(param: str) -> dict:
    return {
        "error": {
            "message": f"Unsupported parameter: '{param}' is not supported with this model.",
            "type": "invalid_request_error",
            "param": param,
            "code": "unsupported_parameter",
        }
    }


def anthropic_refusal(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


OPENAI_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "served",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
}


ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "served",
    "content": [
        {"type": "thinking", "thinking": "Let me reason about the bug first.", "signature": "EqQBCkYIAxgC"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "the answer"},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 11, "output_tokens": 70},
}


def strict_openai(seen: Seen) -> Reply:
    """A current OpenAI model: max_tokens refused always, sampling refused by reasoning models."""
    if "max_tokens" in seen.body:
        return Reply(400, MAX_TOKENS_REFUSED)
    if seen.body["model"].startswith(("o", "gpt-5", "prod-")):
        for param in ("temperature", "top_p", "stop"):
            if param in seen.body:
                return Reply(400, openai_refusal(param))
    return Reply(200, OPENAI_OK)


def strict_anthropic(seen: Seen) -> Reply:
    thinking = seen.body.get("thinking")
    if thinking and "temperature" in seen.body:
        return Reply(400, anthropic_refusal("`temperature` may only be set to 1 when thinking is enabled."))
    if thinking and thinking["budget_tokens"] >= seen.body["max_tokens"]:
        return Reply(400, anthropic_refusal("`max_tokens` must be greater than `thinking.budget_tokens`."))
    if thinking and seen.body.get("tool_choice", {}).get("type") in ("tool", "any"):
        return Reply(400, anthropic_refusal("Thinking may not be enabled when tool_choice forces tool use."))
    return Reply(200, ANTHROPIC_OK)


def credential_for(org: Organization, provider: str, base_url: str) -> ProviderCredential:
    extra = {"api_version": "2024-10-21", "deployments": {"o4-mini": "prod-o4"}} if provider == "azure_openai" else {}
    credential = ProviderCredential(org=org, provider=provider, base_url=base_url, **extra)
    credential.set_api_key(KEY)
    credential.save()
    return credential


def call(org, provider, model, request=REQUEST, **config):
    return gateway.complete(org.pk, ArmSpec(provider, model, FAST | config), request)
