"""Tool calls on each provider's wire, through the gateway and the real SDKs over a socket.

Everything scripted or sent is checked against the documented format, not our own guess:
OpenAI's OpenAPI document (shared/specs: CreateChatCompletionRequest for the bodies sent,
CreateChatCompletionResponse and CreateChatCompletionStreamResponse for the answers and
chunks scripted, ChatCompletionMessageToolCall and its Chunk inside them), and Anthropic's
Messages API as its own SDK types it (MessageParam content blocks and ToolParam for what is
sent, Message and RawMessageStreamEvent for what is scripted).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import anthropic.types
import pytest
import yaml
from jsonschema import Draft202012Validator
from pydantic import TypeAdapter

from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.registry import adapter_class
from providers.types import ArmSpec, Completion, CompletionRequest, Message, Tool, ToolCall, ToolResult
from tests.providers.contracts import FAST, KEY
from tests.providers.fake_server import Reply, sse
from tests.providers.sse_fixtures import (
    OPENAI_USAGE,
    PING,
    anthropic_block,
    anthropic_end,
    anthropic_start,
    openai_chunk,
    openai_delta,
)

# As tests/providers/test_fuzz_openai.py finds it: shared/ beside the checkout, or where the
# environment says.
SHARED_SPEC = Path(__file__).resolve().parents[3] / "shared" / "specs" / "openai-openapi.yaml"
SPEC = Path(os.environ.get("OPENAI_OPENAPI_SPEC", str(SHARED_SPEC)))

READ_FILE = Tool(
    "read_file",
    "Read a file of the working copy",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
LIST_FILES = Tool("list_files", "List the working copy's files")
TOOLS = (READ_FILE, LIST_FILES)
SYSTEM = "You fix bugs with tools."


def turn(*messages: Message) -> CompletionRequest:
    return CompletionRequest(messages=messages, system=SYSTEM, max_output_tokens=256, tools=TOOLS)


FIRST_TURN = turn(Message("user", "Fix the bug in src/app.py"))


def ask(org, spec, request: CompletionRequest = FIRST_TURN, **config) -> Completion:
    return gateway.complete(org.pk, ArmSpec(spec.provider, spec.model, FAST | config), request)


def streamed(stream: bool) -> dict:
    return {"stream": stream}


# --- the documented formats ------------------------------------------------------------------


@lru_cache(maxsize=1)
def openai_components() -> dict:
    if not SPEC.exists():
        pytest.skip("the shared OpenAI OpenAPI document is not here")
    with SPEC.open() as spec_file:
        return _nullable_as_null_type(
            yaml.load(spec_file, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["components"]
        )


def _nullable_as_null_type(node: Any) -> Any:
    """The document is OpenAPI 3.1 but some schemas still say ``nullable: true`` (3.0's
    spelling), which JSON Schema ignores: each is read as the null type it means."""
    if isinstance(node, list):
        return [_nullable_as_null_type(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable_as_null_type(value) for key, value in node.items()}
    if node.get("nullable") is True and isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
    return node


def openai_documented(schema_name: str, value: Any) -> Any:
    """``value``, after checking it against the OpenAPI document's schema of that name."""
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": openai_components()}
    Draft202012Validator(schema).validate(value)
    return value


def anthropic_documented(sdk_type: Any, value: Any) -> Any:
    """``value``, after checking it against the Anthropic SDK's type for it."""
    TypeAdapter(sdk_type).validate_python(value)
    return value


# --- OpenAI's answers: ChatCompletionMessageToolCall, and its chunks in a stream -----------


def openai_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_answer(calls: list[dict], text: str | None = None, finish_reason: str = "tool_calls") -> dict:
    message: dict = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    body = {
        "id": "chatcmpl-tools-1",
        "object": "chat.completion",
        "created": 1,
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": OPENAI_USAGE,
    }
    return openai_documented("CreateChatCompletionResponse", body)


def openai_stream(deltas: list[dict], finish_reason: str = "tool_calls") -> list[str]:
    """A stream of these deltas after the role's, then the finish_reason, the usage, [DONE]."""
    chunks = [openai_chunk([openai_delta({"role": "assistant", "content": None})])]
    chunks += [openai_chunk([openai_delta(delta)]) for delta in deltas]
    chunks += [openai_chunk([openai_delta({}, finish_reason)]), openai_chunk([], OPENAI_USAGE)]
    for chunk in chunks:
        # OpenAI sends ``usage: null`` on every chunk but the last, which its document's
        # schema (a CompletionUsage, optional) does not allow: checked without it.
        documented = {key: value for key, value in chunk.items() if value is not None or key != "usage"}
        openai_documented("CreateChatCompletionStreamResponse", documented)
    return [sse(chunk) for chunk in chunks] + [sse("[DONE]")]


def fragment(index: int, arguments: str, call_id: str = "", name: str = "") -> dict:
    """One ChatCompletionMessageToolCallChunk: id, type and name only in a call's first."""
    piece: dict = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        piece |= {"id": call_id, "type": "function"}
        piece["function"]["name"] = name
    return {"tool_calls": [piece]}


def pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


# --- Anthropic's answers: tool_use blocks, and their input_json_delta events --------------


def anthropic_answer(blocks: list[dict], stop_reason: str = "tool_use") -> dict:
    body = {
        "id": "msg_tools_1",
        "type": "message",
        "role": "assistant",
        "model": "served-model",
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 0},
    }
    anthropic.types.Message.model_validate(body)
    return body


def tool_use(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def anthropic_stream(blocks: list[tuple[dict, list[str]]], stop_reason: str = "tool_use") -> list[str]:
    """Each (block as its content_block_start gives it, the text of its deltas in order): a
    text block's text_delta pieces, a tool_use block's input_json_delta partial_json pieces."""
    events = [anthropic_start(), PING]
    for index, (block, parts) in enumerate(blocks):
        kind = "text_delta" if block["type"] == "text" else "input_json_delta"
        field = "text" if block["type"] == "text" else "partial_json"
        events += anthropic_block(index, block, [{"type": kind, field: part} for part in parts])
    events += anthropic_end(stop_reason=stop_reason)
    stream_event = anthropic.types.RawMessageStreamEvent
    for event in events:
        if event.startswith("event: ") and not event.startswith("event: ping"):
            anthropic_documented(stream_event, json.loads(event.split("data: ", 1)[1]))
    return events


def tool_use_start(call_id: str, name: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}}


# --- one scripted answer per provider: these calls (id, name, arguments text) ---------------


def script(fake, spec, calls: list[tuple[str, str, str]], text: str = "", stream: bool = False) -> None:
    if spec.provider == "anthropic":
        fake.script(anthropic_reply(calls, text, stream))
    elif stream:
        deltas = [{"content": text}] if text else []
        for index, (call_id, name, arguments) in enumerate(calls):
            deltas += [fragment(index, "", call_id, name)] + [fragment(index, part) for part in pieces(arguments, 4)]
        fake.script(Reply(events=openai_stream(deltas, "tool_calls" if calls else "stop")))
    else:
        answer = openai_answer([openai_call(*call) for call in calls], text or None, "tool_calls" if calls else "stop")
        fake.script(Reply(200, answer))


def anthropic_reply(calls: list[tuple[str, str, str]], text: str, stream: bool) -> Reply:
    stop_reason = "tool_use" if calls else "end_turn"
    if not stream:
        blocks = ([{"type": "text", "text": text}] if text else []) + [
            tool_use(call_id, name, json.loads(arguments)) for call_id, name, arguments in calls
        ]
        return Reply(200, anthropic_answer(blocks, stop_reason))
    streamed_blocks = [({"type": "text", "text": ""}, pieces(text, 3))] if text else []
    streamed_blocks += [(tool_use_start(call_id, name), ["", *pieces(args, 4)]) for call_id, name, args in calls]
    return Reply(events=anthropic_stream(streamed_blocks, stop_reason))


def call_id(spec, number: int) -> str:
    return f"toolu_0{number}" if spec.provider == "anthropic" else f"call_{number}"


# --- what is sent ----------------------------------------------------------------------------


def test_the_tools_are_sent_in_the_providers_format(wire, fake):
    spec, org = wire
    script(fake, spec, [], text="No tool needed.")
    completion = ask(org, spec)
    sent = fake.seen[-1].body
    if spec.provider == "anthropic":
        assert sent["tools"] == [
            {
                "name": "read_file",
                "description": "Read a file of the working copy",
                "input_schema": READ_FILE.parameters,
            },
            {
                "name": "list_files",
                "description": "List the working copy's files",
                "input_schema": LIST_FILES.parameters,
            },
        ]
        anthropic_documented(list[anthropic.types.ToolParam], sent["tools"])
    else:
        assert sent["tools"] == [
            {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": p}}
            for tool, p in ((READ_FILE, READ_FILE.parameters), (LIST_FILES, LIST_FILES.parameters))
        ]
        openai_documented("CreateChatCompletionRequest", sent)
    assert "tool_choice" not in sent  # auto, the default: the model may answer without a call
    assert completion.raw_request["tools"] == sent["tools"]  # what the attempt stores as sent
    script(fake, spec, [], text="diff")
    ask(org, spec, replace(FIRST_TURN, tools=()))
    assert "tools" not in fake.seen[-1].body  # a plain completion is asked as before


HISTORY = turn(
    Message("user", "Fix the bug in src/app.py"),
    Message(
        "assistant",
        "Let me look.",
        tool_calls=(
            ToolCall("call_1", "read_file", {"path": "src/app.py"}),
            ToolCall("call_2", "read_file", {}, malformed='{"path": "src/ap'),
        ),
    ),
    Message(
        "user",
        "",
        tool_results=(
            ToolResult("call_1", "print('hi')"),
            ToolResult("call_2", "the arguments are not a JSON object", is_error=True),
        ),
    ),
    Message("assistant", "", tool_calls=(ToolCall("call_3", "list_files"),)),
    Message("user", "You have 3 turns left.", tool_results=(ToolResult("call_3", "src/app.py\nREADME.md"),)),
)

OPENAI_HISTORY = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Fix the bug in src/app.py"},
    {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            openai_call("call_1", "read_file", '{"path": "src/app.py"}'),
            openai_call("call_2", "read_file", '{"path": "src/ap'),  # as the model sent it
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
    {"role": "tool", "tool_call_id": "call_2", "content": "Error: the arguments are not a JSON object"},
    {"role": "assistant", "content": None, "tool_calls": [openai_call("call_3", "list_files", "{}")]},
    {"role": "tool", "tool_call_id": "call_3", "content": "src/app.py\nREADME.md"},
    {"role": "user", "content": "You have 3 turns left."},
]

ANTHROPIC_HISTORY = [
    {"role": "user", "content": "Fix the bug in src/app.py"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            tool_use("call_1", "read_file", {"path": "src/app.py"}),
            tool_use("call_2", "read_file", {}),  # a malformed call's input cannot be its text
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "print('hi')", "is_error": False},
            {
                "type": "tool_result",
                "tool_use_id": "call_2",
                "content": "the arguments are not a JSON object",
                "is_error": True,
            },
        ],
    },
    {"role": "assistant", "content": [tool_use("call_3", "list_files", {})]},
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_3", "content": "src/app.py\nREADME.md", "is_error": False},
            {"type": "text", "text": "You have 3 turns left."},  # after every tool_result, as Anthropic requires
        ],
    },
]


def test_a_history_of_calls_and_results_is_sent_as_the_provider_reads_it(wire, fake):
    spec, org = wire
    script(fake, spec, [], text="Done.")
    completion = ask(org, spec, HISTORY)
    sent = fake.seen[-1].body
    if spec.provider == "anthropic":
        assert sent["system"] == SYSTEM and sent["messages"] == ANTHROPIC_HISTORY
        for message in sent["messages"]:
            anthropic_documented(anthropic.types.MessageParam, message)
            for block in message["content"] if isinstance(message["content"], list) else []:
                anthropic_documented(anthropic.types.ContentBlockParam, block)
    else:
        assert _parsed_arguments(sent["messages"], keep="call_2") == _parsed_arguments(OPENAI_HISTORY, keep="call_2")
        openai_documented("CreateChatCompletionRequest", sent)
    assert completion.raw_request["messages"] == sent["messages"]


def _parsed_arguments(messages: list[dict], keep: str) -> list[dict]:
    """The messages with each call's arguments text parsed (its spacing is ours to choose),
    except the malformed call's, which must go back exactly as sent."""
    parsed = json.loads(json.dumps(messages))
    for message in parsed:
        for call in message.get("tool_calls") or []:
            if call["id"] != keep:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return parsed


# --- what is read back -----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_one_call_is_read_from_the_answer(wire, fake, stream):
    spec, org = wire
    script(fake, spec, [(call_id(spec, 1), "read_file", '{"path": "src/app.py"}')], "I'll read it.", stream)
    completion = ask(org, spec, **streamed(stream))
    assert completion.tool_calls == (ToolCall(call_id(spec, 1), "read_file", {"path": "src/app.py"}),)
    assert completion.text == "I'll read it."
    assert completion.finish_reason == ("tool_use" if spec.provider == "anthropic" else "tool_calls")
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 7)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_two_calls_in_one_turn_keep_their_order(wire, fake, stream):
    spec, org = wire
    calls = [(call_id(spec, 1), "read_file", '{"path": "a.py"}'), (call_id(spec, 2), "list_files", "{}")]
    script(fake, spec, calls, stream=stream)
    completion = ask(org, spec, **streamed(stream))
    assert completion.tool_calls == (
        ToolCall(call_id(spec, 1), "read_file", {"path": "a.py"}),
        ToolCall(call_id(spec, 2), "list_files", {}),
    )
    assert completion.text == ""  # content null on OpenAI's wire, no text block on Anthropic's


# Escapes, a quote and a non-ASCII character inside the arguments, so a piece ends mid-escape.
AWKWARD = {"path": 'docs/caf\u00e9 "notes".md', "text": "line 1\nline\t2 \\ end"}


def test_streamed_arguments_split_at_awkward_places_are_joined(wire, fake):
    spec, org = wire
    text = json.dumps(AWKWARD)
    if spec.provider == "anthropic":
        first = (tool_use_start("toolu_01", "read_file"), ["", *pieces(text, 2)])
        second = (tool_use_start("toolu_02", "list_files"), [""])  # no input at all: {}
        events = anthropic_stream([first, second])
        expected = (ToolCall("toolu_01", "read_file", AWKWARD), ToolCall("toolu_02", "list_files", {}))
    else:
        # Two calls' fragments interleaved by index, each argument piece two characters long.
        deltas = [fragment(0, "", "call_a", "read_file"), fragment(1, "", "call_b", "read_file")]
        for piece in pieces(text, 2):
            deltas += [fragment(0, piece), fragment(1, piece)]
        events = openai_stream(deltas)
        expected = (ToolCall("call_a", "read_file", AWKWARD), ToolCall("call_b", "read_file", AWKWARD))
    fake.script(Reply(events=events, piece_bytes=7))  # and each event cut on the wire too
    completion = ask(org, spec)
    assert completion.tool_calls == expected
    assert completion.first_token_ms is not None  # argument fragments are the answer's tokens


def test_malformed_arguments_are_kept_as_the_model_sent_them(wire, fake):
    spec, org = wire
    cut = '{"path": "src/a'
    if spec.provider == "anthropic":
        # Cut by max_tokens in the middle of the call's JSON.
        fake.script(
            Reply(events=anthropic_stream([(tool_use_start("toolu_01", "read_file"), ["", cut])], "max_tokens"))
        )
        expected = (ToolCall("toolu_01", "read_file", {}, malformed=cut),)
    else:
        calls = [openai_call("call_1", "read_file", cut), openai_call("call_2", "read_file", '["a.py"]')]
        fake.script(Reply(200, openai_answer(calls, finish_reason="length")))
        expected = (
            ToolCall("call_1", "read_file", {}, malformed=cut),
            ToolCall("call_2", "read_file", {}, malformed='["a.py"]'),  # JSON, but not an object
        )
    completion = ask(org, spec)
    assert completion.tool_calls == expected
    assert completion.finish_reason in ("max_tokens", "length")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_answer_with_text_and_no_calls_has_none(wire, fake, stream):
    spec, org = wire
    script(fake, spec, [], text="diff --git a/x b/x", stream=stream)
    completion = ask(org, spec, **streamed(stream))
    assert completion.tool_calls == () and completion.text == "diff --git a/x b/x"
    assert completion.finish_reason in ("stop", "end_turn")
    assert completion.raw_request["tools"]  # an agent's turn, answered without a call


def test_a_refusal_with_tools_is_still_a_refusal(wire, fake):
    spec, org = wire
    if spec.provider == "anthropic":
        fake.script(Reply(200, anthropic_answer([{"type": "text", "text": "I can't help."}], "refusal")))
    else:
        fake.script(Reply(200, openai_answer([], None, "content_filter")))
    with pytest.raises(ProviderError) as refused:
        ask(org, spec)
    assert refused.value.category == ErrorCategory.CONTENT_FILTERED
    assert refused.value.raw_request["tools"]  # the attempt's record shows what was sent


@pytest.mark.parametrize("wire", ["anthropic"], indirect=True)
def test_anthropic_structured_output_cut_mid_json_is_the_text_as_streamed(wire, fake):
    """A judge's forced tool is its answer, not an agent's call; cut by max_tokens, its text is
    what was streamed (which the judge's reader refuses as JSON), not an adapter crash."""
    spec, org = wire
    judged = CompletionRequest(messages=(Message("user", "Judge"),), response_schema={"type": "object"})
    fake.script(Reply(events=anthropic_stream([(tool_use_start("toolu_01", "answer"), ['{"sco'])], "max_tokens")))
    completion = ask(org, spec, judged)
    assert completion.text == '{"sco' and completion.tool_calls == ()
    fake.script(Reply(events=anthropic_stream([(tool_use_start("toolu_01", "answer"), ['{"score"', ": 1}"])])))
    assert ask(org, spec, judged).text == '{"score": 1}'


# --- where compatible servers differ from OpenAI ---------------------------------------------


@pytest.mark.parametrize("wire", ["openai_compatible"], indirect=True)
def test_a_servers_object_arguments_and_missing_ids_are_taken(wire, fake):
    spec, org = wire
    answer = openai_answer([openai_call("call_1", "read_file", "{}")])
    # As some servers send it: no id, the arguments already an object.
    answer["choices"][0]["message"]["tool_calls"] = [
        {"type": "function", "function": {"name": "read_file", "arguments": {"path": "a.py"}}},
        {"type": "function", "function": {"name": "list_files", "arguments": ""}},
    ]
    fake.script(Reply(200, answer), Reply(200, answer))
    first, again = ask(org, spec, stream=False), ask(org, spec, stream=False)
    assert [(call.name, call.arguments, call.malformed) for call in first.tool_calls] == [
        ("read_file", {"path": "a.py"}, ""),
        ("list_files", {}, ""),
    ]
    ids = [call.id for call in first.tool_calls]
    assert all(ids) and len(set(ids)) == 2
    assert [call.id for call in again.tool_calls] == ids  # the same answer names its calls alike


@pytest.mark.parametrize("wire", ["openai_compatible"], indirect=True)
def test_a_stream_without_indexes_starts_a_call_at_each_new_id(wire, fake):
    spec, org = wire
    deltas = []
    for number, path in ((1, "a.py"), (2, "b.py")):
        deltas.append({"tool_calls": [{"id": f"call_{number}", "function": {"name": "read_file", "arguments": ""}}]})
        deltas += [
            {"tool_calls": [{"function": {"arguments": part}}]} for part in pieces(json.dumps({"path": path}), 3)
        ]
    events = [sse(openai_chunk([openai_delta(delta)])) for delta in deltas]
    fake.script(
        Reply(events=[*events, sse(openai_chunk([openai_delta({}, "tool_calls")], OPENAI_USAGE)), sse("[DONE]")])
    )
    completion = ask(org, spec)
    assert completion.tool_calls == (
        ToolCall("call_1", "read_file", {"path": "a.py"}),
        ToolCall("call_2", "read_file", {"path": "b.py"}),
    )


# --- the gateway around them -----------------------------------------------------------------


def test_the_credentials_key_is_redacted_from_calls_and_a_lookalike_is_not(wire, fake):
    spec, org = wire
    lookalike = "sk-test-FIXTURE-abcdefghijklmnop"
    arguments = json.dumps({"path": "settings.py", "text": f"KEY = '{KEY}'\nFAKE = '{lookalike}'"})
    script(fake, spec, [(call_id(spec, 1), "read_file", arguments)])
    (called,) = ask(org, spec).tool_calls
    assert KEY not in json.dumps(called.arguments) and "[redacted]" in called.arguments["text"]
    assert lookalike in called.arguments["text"]  # a file the model writes may quote one
    if spec.provider != "anthropic":
        # With a token count the gateway has to correct: the calls survive that too.
        answer = openai_answer([openai_call("call_1", "read_file", f'{{"path": "{KEY}')])
        fake.script(Reply(200, answer | {"usage": OPENAI_USAGE | {"prompt_tokens": -1}}))
        broken = ask(org, spec)
        assert broken.tool_calls == (ToolCall("call_1", "read_file", {}, malformed='{"path": "[redacted]'),)
        assert any(warning.startswith("usage.input_tokens -1") for warning in broken.warnings)


def test_a_budget_reserves_for_the_tools_schemas_and_earlier_calls():
    plain = replace(FIRST_TURN, tools=())
    with_tools = gateway.estimated_prompt_tokens(FIRST_TURN)
    assert with_tools > gateway.estimated_prompt_tokens(plain)
    big_call = Message("assistant", "", tool_calls=(ToolCall("c", "write_file", {"text": "x" * 4000}),))
    answered = Message("user", "", tool_results=(ToolResult("c", "ok"),))
    later = replace(FIRST_TURN, messages=(*FIRST_TURN.messages, big_call, answered))
    assert gateway.estimated_prompt_tokens(later) >= with_tools + 1000
    assert gateway.estimated_tokens(later) == gateway.estimated_prompt_tokens(later) + later.max_output_tokens


def test_an_anthropic_agent_arm_may_not_think():
    errors = adapter_class("anthropic").config_errors
    agent = {"solver": "agent", "max_tokens": 8000, "thinking_budget_tokens": 2048}
    assert any(
        error.startswith("config.thinking_budget_tokens cannot be used on an agent arm")
        for error in errors("claude-sonnet-4-5", agent)
    )
    assert errors("claude-sonnet-4-5", agent | {"solver": "single_turn"}) == []
    assert errors("claude-sonnet-4-5", {"solver": "agent", "max_tokens": 8000}) == []
