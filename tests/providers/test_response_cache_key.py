"""What makes two requests the same request for the response cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from providers.adapters.config import OPERATIONAL_KEYS, SOLVER_KEYS
from providers.registry import adapter_class, provider_names
from providers.response_cache import response_cache_key
from providers.types import ArmSpec, CompletionRequest, Message, Tool, ToolCall, ToolResult

ARM = ArmSpec("openai", "gpt-4o", {"temperature": 0, "max_tokens": 1000, "send_seed": True}, credential="eu")
REQUEST = CompletionRequest(
    messages=(Message("user", "Fix the bug."),),
    system="You write patches.",
    max_output_tokens=1000,
    temperature=0,
    seed_key="1:task:arm:0",
    recorded_answer="--- a/x\n+++ b/x\n",
)
KEY = response_cache_key(1, ARM, REQUEST)

# An agent's later turn: its tools, a call it made and the result it was shown.
READ = Tool("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
CALLED = Message("assistant", "", tool_calls=(ToolCall("call_1", "read_file", {"path": "a.py"}),))
ANSWERED = Message("user", "", tool_results=(ToolResult("call_1", "print(1)"),))
AGENT_TURN = replace(REQUEST, tools=(READ,), messages=(*REQUEST.messages, CALLED, ANSWERED))
AGENT_KEY = response_cache_key(1, ARM, AGENT_TURN)


def agent_turn(call: ToolCall = CALLED.tool_calls[0], result: ToolResult = ANSWERED.tool_results[0], **changes):
    messages = (*REQUEST.messages, replace(CALLED, tool_calls=(call,)), replace(ANSWERED, tool_results=(result,)))
    return replace(AGENT_TURN, messages=messages, **changes)


def test_a_key_is_a_sha256_hex_digest():
    assert KEY is not None and len(KEY) == 64 and int(KEY, 16) >= 0


@pytest.mark.parametrize(
    ("org_id", "arm", "request_"),
    [
        (2, ARM, REQUEST),
        (1, replace(ARM, provider="azure_openai"), REQUEST),
        (1, replace(ARM, model_name="gpt-4o-mini"), REQUEST),
        (1, replace(ARM, credential="us"), REQUEST),
        (1, replace(ARM, config=ARM.config | {"send_seed": False}), REQUEST),
        (1, replace(ARM, config=ARM.config | {"reasoning_effort": "low"}), REQUEST),
        (1, ARM, replace(REQUEST, messages=(Message("user", "Fix the bug!"),))),
        (1, ARM, replace(REQUEST, messages=(*REQUEST.messages, Message("assistant", "ok")))),
        (1, ARM, replace(REQUEST, system="")),
        (1, ARM, replace(REQUEST, max_output_tokens=999)),
        (1, ARM, replace(REQUEST, top_p=0.9)),
        (1, ARM, replace(REQUEST, stop=("```",))),
        (1, ARM, replace(REQUEST, response_schema={"type": "object"})),
    ],
    ids=[
        "org",
        "provider",
        "model",
        "credential",
        "config",
        "new-config-key",
        "message",
        "turns",
        "system",
        "max-output",
        "top_p",
        "stop",
        "schema",
    ],
)
def test_whatever_shapes_the_answer_changes_the_key(org_id, arm, request_):
    assert response_cache_key(org_id, arm, request_) not in (None, KEY)


@pytest.mark.parametrize(
    "request_",
    [
        replace(REQUEST, tools=(READ,)),
        agent_turn(tools=(replace(READ, description="Read a whole file"),)),
        agent_turn(tools=(replace(READ, parameters={"type": "object"}),)),
        agent_turn(tools=(READ, Tool("list_files", "List files"))),
        agent_turn(ToolCall("call_1", "read_file", {"path": "b.py"})),
        agent_turn(ToolCall("call_1", "list_files", {"path": "a.py"})),
        agent_turn(ToolCall("call_1", "read_file", {}, malformed='{"path": "a.py"')),
        agent_turn(result=ToolResult("call_1", "print(2)")),
        agent_turn(result=ToolResult("call_1", "print(1)", is_error=True)),
    ],
    ids=["tools", "description", "schema", "more-tools", "arguments", "name", "malformed", "result", "error"],
)
def test_whatever_an_agent_was_given_or_shown_changes_the_key(request_):
    assert response_cache_key(1, ARM, request_) not in (None, KEY, AGENT_KEY)


def test_the_schema_name_counts_only_with_a_schema():
    with_schema = replace(REQUEST, response_schema={"type": "object"})
    renamed = replace(with_schema, response_schema_name="verdict")
    assert response_cache_key(1, ARM, with_schema) != response_cache_key(1, ARM, renamed)
    assert response_cache_key(1, ARM, replace(REQUEST, response_schema_name="verdict")) == KEY


@pytest.mark.parametrize(
    ("arm", "request_"),
    [
        (ARM, replace(REQUEST, seed_key="2:task:arm:1")),  # another run or repetition
        (ARM, replace(REQUEST, recorded_answer=None)),  # never sent to a model
        (ARM, replace(REQUEST, temperature=0.0)),
        (replace(ARM, key="run-arm:7"), REQUEST),  # the concurrency bucket
        (replace(ARM, config=ARM.config | {"temperature": 0.0, "max_tokens": 1000.0}), REQUEST),
        (replace(ARM, config=dict(reversed(list(ARM.config.items())))), REQUEST),
        *((replace(ARM, config=ARM.config | {name: 3}), REQUEST) for name in sorted(OPERATIONAL_KEYS)),
    ],
)
def test_what_does_not_shape_the_answer_keeps_the_key(arm, request_):
    assert response_cache_key(1, arm, request_) == KEY


@pytest.mark.parametrize("temperature", [None, 0.2, 1, 2])
def test_only_temperature_zero_is_cacheable(temperature):
    assert response_cache_key(1, ARM, replace(REQUEST, temperature=temperature)) is None


def test_a_key_survives_text_no_codec_could_encode():
    odd = replace(REQUEST, messages=(Message("user", "broken \udcff surrogate"),))
    assert response_cache_key(1, ARM, odd) not in (None, KEY)


# Each adapter's settings that go into the key. A new setting must be placed: in
# OPERATIONAL_KEYS (how a call is made) or here (what it answers).
ANSWER_KEYS = {
    "replay": {"predictions"},  # which imported predictions: the answers themselves
    "http_agent": set(),  # a team's agent service: only how long it has, and how it is called
    # An agent's settings shape what each turn is sent (its tools, its ceilings): in the key.
    "anthropic": {"max_tokens", "temperature", "top_p", "extra_body", "thinking_budget_tokens", *SOLVER_KEYS},
    "openai": {
        "max_tokens",
        "temperature",
        "top_p",
        "extra_body",
        "send_seed",
        "structured_output",
        "reasoning_effort",
        *SOLVER_KEYS,
    },
    "mock": {
        "max_tokens",
        "temperature",
        "top_p",
        "mode",
        "quality",
        "failure_rate",
        "price_input_per_mtok",
        "price_output_per_mtok",
        "invalid",
        "failure_category",
        "agent_fault",
        *SOLVER_KEYS,
    },
}


OPENAI_DIALECTS = {"azure_openai": "openai", "openrouter": "openai", "openai_compatible": "openai"}


@pytest.mark.parametrize("provider", provider_names())
def test_every_setting_is_either_operational_or_part_of_the_key(provider):
    keys = set(adapter_class(provider).config_keys)
    assert keys - OPERATIONAL_KEYS == ANSWER_KEYS[OPENAI_DIALECTS.get(provider, provider)]


def test_every_operational_key_is_a_setting_some_adapter_reads():
    declared = set().union(*(adapter_class(provider).config_keys for provider in provider_names()))
    assert declared >= OPERATIONAL_KEYS
