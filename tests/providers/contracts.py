"""What each provider's API answers, for the tests that run the real adapters (their real SDKs)
against a local server (tests/providers/fake_server.py): answer and error bodies, the adapters'
contract table (``WIRES``), and the one request the contract tests send."""

from __future__ import annotations

from dataclasses import dataclass

from providers import gateway
from providers.types import ArmSpec, CompletionRequest, Message

KEY = "sk-live-SECRET-0123456789abcdef"


REQUEST = CompletionRequest(
    messages=(Message("user", "Fix the bug"),),
    system="You write patches.",
    max_output_tokens=64,
    temperature=0.0,
    seed_key="7:task:arm:0",
    # The one answer a request may carry (a replay arm's, played back by that adapter alone).
    recorded_answer="RECORDED-ANSWER-NEVER-SENT",
)


FAST = {"max_retries": 0, "timeout_read_s": 5}


def openai_body(text="diff --git a/x b/x", **extra):
    usage = {
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    usage |= extra.pop("usage", {})
    return {
        "id": "chatcmpl-42",
        "object": "chat.completion",
        "created": 1,
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage,
    } | extra


def anthropic_body(text="diff --git a/x b/x"):
    return {
        "id": "msg_42",
        "type": "message",
        "role": "assistant",
        "model": "served-model",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 0},
    }


def openai_error(message, code=None):
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def anthropic_error(message, kind="invalid_request_error"):
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass
class Wire:
    provider: str
    model: str
    path: str
    success: dict
    error: object  # (message, code) -> body
    base_suffix: str = "/v1"
    api_version: str = ""
    deployments: dict | None = None
    token_limit_field: str = "max_tokens"


WIRES = {
    "openai": Wire(
        "openai",
        "gpt-4o",
        "/v1/chat/completions",
        openai_body(),
        openai_error,
        token_limit_field="max_completion_tokens",
    ),
    "openrouter": Wire(
        "openrouter",
        "anthropic/claude-sonnet",
        "/v1/chat/completions",
        openai_body(usage={"cost": 0.00042}),
        openai_error,
    ),
    "openai_compatible": Wire("openai_compatible", "llama3", "/v1/chat/completions", openai_body(), openai_error),
    "azure_openai": Wire(
        "azure_openai",
        "gpt-4o",
        "/openai/deployments/prod-4o/chat/completions",
        openai_body(),
        openai_error,
        base_suffix="",
        api_version="2024-10-21",
        deployments={"gpt-4o": "prod-4o"},
        token_limit_field="max_completion_tokens",
    ),
    "anthropic": Wire(
        "anthropic",
        "claude-sonnet",
        "/v1/messages",
        anthropic_body(),
        lambda message, code=None: anthropic_error(message),
        base_suffix="",
    ),
}


def call(org, spec, **config):
    return gateway.complete(org.pk, ArmSpec(spec.provider, spec.model, FAST | config), REQUEST)


def gpt4o_answer(text: str = "no diff") -> dict:
    """A chat completion as gpt-4o's API sends it (no cached tokens)."""
    return {
        "id": "chatcmpl-crash",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }
