"""Fake providers that act as a model over the real wire: responders for fake_server.py's
``FakeProvider.responder`` that read a request as the provider documents it, let the mock
agent (providers/adapters/mock/agent.py) take the turn, and answer in that provider's format,
as one JSON body or as an SSE stream, whichever the request asked for.

Written from the providers' documents, not from our adapters: an adapter that sends or reads
tool calls wrongly meets a model that answers wrongly or refuses it, as the real one would.

- OpenAI chat completions (the OpenAPI document in shared/specs): ``tools`` of type
  ``function``; an assistant message's ``tool_calls`` (arguments a JSON string); one
  ``role: tool`` message per call, each naming its ``tool_call_id``; the answer's
  ``message.tool_calls`` and ``finish_reason: tool_calls``; streamed, ``delta.tool_calls``
  fragments keyed by ``index``, the id, type and name in the first, the arguments spread over
  the rest. OpenRouter and compatible servers speak the same.
- Anthropic messages: ``tools`` with ``input_schema``; ``tool_use`` blocks (input an object)
  answered by ``tool_result`` blocks in the next user message; the answer's content blocks and
  ``stop_reason: tool_use``; streamed, ``content_block_start`` of a ``tool_use`` with an empty
  input and ``input_json_delta`` events carrying ``partial_json``.

A request that breaks the tool-call rules gets the provider's 400. The mock's choices are
seeded by ``seed_key``, else by the first user message (the wire carries no attempt key), so
every turn of one conversation gets the same seed.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from providers.adapters.mock.agent import next_turn
from providers.types import CompletionRequest, Message, Tool, ToolCall, ToolResult
from tests.providers.fake_server import Reply, Seen, sse

Responder = Callable[[Seen], Reply]
# Arguments and text are streamed in pieces this long: a JSON string cut mid-token.
PIECE = 7


class Refused(Exception):
    """A request the provider would turn away with a 400."""


def openai_agent(config: dict | None = None, seed_key: str = "") -> Responder:
    """An OpenAI chat completions server whose model is the mock agent."""
    return _responder(config or {}, seed_key, openai_request, openai_answer, openai_error)


def anthropic_agent(config: dict | None = None, seed_key: str = "") -> Responder:
    """An Anthropic messages server whose model is the mock agent."""
    return _responder(config or {}, seed_key, anthropic_request, anthropic_answer, anthropic_error)


def _responder(config, seed_key, read, answer, error) -> Responder:
    def respond(seen: Seen) -> Reply:
        if config.get("mode") == "error":
            return error(500, "The mock agent's server failed, as it was told to.")
        try:
            request = read(seen.body)
        except (Refused, KeyError, TypeError, AttributeError) as problem:
            return error(400, str(problem))
        request = replace(request, seed_key=seed_key or _conversation_key(request))
        rng = random.Random(int.from_bytes(hashlib.sha256(request.seed_key.encode()).digest()[:8], "big"))
        text, calls = next_turn(request, config, rng)
        return answer(seen.body, request, text, calls)

    return respond


def _conversation_key(request: CompletionRequest) -> str:
    first = next((message.content for message in request.messages if message.role == "user"), "")
    return "wire:" + hashlib.sha256(first.encode()).hexdigest()[:16]


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _said(text: str, calls: tuple[ToolCall, ...]) -> str:
    return text + "".join(call.name + (call.malformed or json.dumps(call.arguments)) for call in calls)


def _pieces(text: str) -> list[str]:
    return [text[start : start + PIECE] for start in range(0, len(text), PIECE)]


# OpenAI chat completions


def openai_request(body: dict) -> CompletionRequest:
    system: list[str] = []
    messages: list[Message] = []
    unanswered: set[str] = set()  # the last assistant message's calls still without a tool message
    for number, message in enumerate(body["messages"]):
        role = message["role"]
        if role != "tool" and unanswered:
            raise _openai_unanswered(unanswered)
        if role in ("system", "developer"):
            system.append(_openai_text(message["content"]))
        elif role == "assistant":
            calls = tuple(_openai_call(call) for call in message.get("tool_calls") or ())
            unanswered = {call.id for call in calls}
            messages.append(Message("assistant", _openai_text(message.get("content")), tool_calls=calls))
        elif role == "tool":
            if message["tool_call_id"] not in unanswered:
                raise Refused(
                    f"Invalid parameter: messages.[{number}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'."
                )
            unanswered.discard(message["tool_call_id"])
            result = ToolResult(message["tool_call_id"], _openai_text(message["content"]))
            messages = _with_result(messages, result)
        elif role == "user":
            messages = _with_user_text(messages, _openai_text(message["content"]))
        else:
            raise Refused(f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool'.")
    if unanswered:
        raise _openai_unanswered(unanswered)
    return CompletionRequest(
        tuple(messages),
        system="\n".join(system),
        max_output_tokens=body.get("max_completion_tokens") or body.get("max_tokens") or 4096,
        tools=tuple(_openai_tool(tool) for tool in body.get("tools") or ()),
    )


def _openai_unanswered(ids: set[str]) -> Refused:
    return Refused(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(sorted(ids))}"
    )


def _with_result(messages: list[Message], result: ToolResult) -> list[Message]:
    """Tool messages in a row are one user turn of results."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and last.tool_results and not last.content:
        return [*messages[:-1], replace(last, tool_results=(*last.tool_results, result))]
    return [*messages, Message("user", "", tool_results=(result,))]


def _with_user_text(messages: list[Message], text: str) -> list[Message]:
    """A user message right after the tool messages is the same turn's words."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and last.tool_results and not last.content:
        return [*messages[:-1], replace(last, content=text)]
    return [*messages, Message("user", text)]


def _openai_text(content: Any) -> str:
    """A message's content: a string, null, or an array of content parts (text ones read)."""
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(part["text"] for part in content if part.get("type") == "text")


def _openai_call(call: dict) -> ToolCall:
    if call.get("type") != "function":
        raise Refused(f"Invalid value for 'type': {call.get('type')!r}; expected 'function'.")
    arguments = call["function"]["arguments"]
    if not isinstance(arguments, str):
        raise Refused("Invalid type for 'messages.tool_calls.function.arguments': expected a string.")
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(call["id"], call["function"]["name"], parsed)
    return ToolCall(call["id"], call["function"]["name"], malformed=arguments)


def _openai_tool(tool: dict) -> Tool:
    if tool.get("type") != "function" or not tool.get("function", {}).get("name"):
        raise Refused("Missing required parameter: 'tools[].function.name' (tools must be of type 'function').")
    function = tool["function"]
    return Tool(function["name"], function.get("description", ""), function.get("parameters") or {})


def openai_error(status: int, message: str) -> Reply:
    kind = "invalid_request_error" if status == 400 else "server_error"
    return Reply(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})


def _openai_wire_call(call: ToolCall) -> dict:
    arguments = call.malformed or json.dumps(call.arguments)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def openai_answer(body: dict, request: CompletionRequest, text: str, calls: tuple[ToolCall, ...]) -> Reply:
    finish_reason = "tool_calls" if calls else "stop"
    prompt, completion = _tokens(request.prompt_text()), _tokens(_said(text, calls))
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if body.get("stream"):
        wants_usage = (body.get("stream_options") or {}).get("include_usage", False)
        return Reply(events=_openai_events(body["model"], text, calls, finish_reason, usage if wants_usage else None))
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = [_openai_wire_call(call) for call in calls]
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    return Reply(
        body={
            "id": "chatcmpl-agent",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [choice],
            "usage": usage,
        }
    )


def _openai_events(model: str, text: str, calls: tuple[ToolCall, ...], finish_reason: str, usage: dict | None):
    def chunk(delta: dict, finish: str | None = None) -> str:
        choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return sse(
            {
                "id": "chatcmpl-agent",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": model,
                "choices": choices,
            }
        )

    events = [chunk({"role": "assistant", "content": "" if text or not calls else None, "refusal": None})]
    events += [chunk({"content": piece}) for piece in _pieces(text)]
    for index, call in enumerate(calls):
        wire = _openai_wire_call(call)
        head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [head]}))
        arguments = wire["function"]["arguments"]
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in _pieces(arguments)]
    events.append(chunk({}, finish_reason))
    if usage is not None:
        events.append(
            sse(
                {
                    "id": "chatcmpl-agent",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        )
    return [*events, sse("[DONE]")]


# Anthropic messages


def anthropic_request(body: dict) -> CompletionRequest:
    if "max_tokens" not in body:
        raise Refused("max_tokens: Field required")
    messages: list[Message] = []
    asked: set[str] = set()  # the tool_use ids of the assistant message just before
    for number, message in enumerate(body["messages"]):
        blocks = _anthropic_blocks(message["content"])
        if message["role"] == "assistant":
            if asked:
                raise _unanswered(number - 1, asked)
            calls = tuple(_anthropic_call(number, block) for block in blocks if block["type"] == "tool_use")
            asked = {call.id for call in calls}
            messages.append(Message("assistant", _anthropic_text(blocks), tool_calls=calls))
            continue
        results = tuple(_anthropic_result(block) for block in blocks if block["type"] == "tool_result")
        answered = {result.call_id for result in results}
        if answered - asked:
            raise Refused(
                f"messages.{number}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(sorted(answered - asked))}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
        if asked - answered:
            raise _unanswered(number - 1, asked - answered)
        asked = set()
        messages.append(Message("user", _anthropic_text(blocks), tool_results=results))
    return CompletionRequest(
        tuple(messages),
        system=_anthropic_text(_anthropic_blocks(body.get("system") or "")),
        max_output_tokens=body["max_tokens"],
        tools=tuple(_anthropic_tool(tool) for tool in body.get("tools") or ()),
    )


def _unanswered(number: int, ids: set[str]) -> Refused:
    return Refused(
        f"messages.{number}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(sorted(ids))}. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )


def _anthropic_blocks(content: Any) -> list[dict]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _anthropic_text(blocks: list[dict]) -> str:
    return "".join(block["text"] for block in blocks if block["type"] == "text")


def _anthropic_call(number: int, block: dict) -> ToolCall:
    if not isinstance(block.get("input"), dict):
        raise Refused(f"messages.{number}.content.tool_use.input: Input should be a valid dictionary")
    return ToolCall(block["id"], block["name"], block["input"])


def _anthropic_result(block: dict) -> ToolResult:
    content = block.get("content", "")
    text = content if isinstance(content, str) else _anthropic_text(content)
    return ToolResult(block["tool_use_id"], text, bool(block.get("is_error", False)))


def _anthropic_tool(tool: dict) -> Tool:
    if not tool.get("name") or not isinstance(tool.get("input_schema"), dict):
        raise Refused("tools.0.custom.input_schema: Field required")
    return Tool(tool["name"], tool.get("description", ""), tool["input_schema"])


def anthropic_error(status: int, message: str) -> Reply:
    kind = "invalid_request_error" if status == 400 else "api_error"
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}})


def _tool_use_id(call: ToolCall) -> str:
    return "toolu_" + call.id.removeprefix("call_")


def anthropic_answer(body: dict, request: CompletionRequest, text: str, calls: tuple[ToolCall, ...]) -> Reply:
    stop_reason = "tool_use" if calls else "end_turn"
    input_tokens, output_tokens = _tokens(request.prompt_text()), _tokens(_said(text, calls))
    if body.get("stream"):
        return Reply(events=_anthropic_events(body["model"], text, calls, stop_reason, input_tokens, output_tokens))
    content: list[dict] = [{"type": "text", "text": text}] if text else []
    # A body holds the input as an object: a broken one can only be sent as the text it is.
    content += [
        {"type": "tool_use", "id": _tool_use_id(call), "name": call.name, "input": call.malformed or call.arguments}
        for call in calls
    ]
    return Reply(
        body={
            "id": "msg_agent",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    )


def _anthropic_events(model, text, calls, stop_reason, input_tokens, output_tokens) -> list[str]:
    def event(data: dict) -> str:
        return sse(data, data["type"])

    start = {
        "id": "msg_agent",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    events = [event({"type": "message_start", "message": start}), event({"type": "ping"})]
    blocks: list[tuple[dict, list[dict]]] = []
    if text:
        blocks.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(text)]))
    for call in calls:
        head = {"type": "tool_use", "id": _tool_use_id(call), "name": call.name, "input": {}}
        arguments = call.malformed or json.dumps(call.arguments)
        blocks.append((head, [{"type": "input_json_delta", "partial_json": p} for p in ["", *_pieces(arguments)]]))
    for index, (head, deltas) in enumerate(blocks):
        events.append(event({"type": "content_block_start", "index": index, "content_block": head}))
        events += [event({"type": "content_block_delta", "index": index, "delta": delta}) for delta in deltas]
        events.append(event({"type": "content_block_stop", "index": index}))
    finish = {"stop_reason": stop_reason, "stop_sequence": None}
    events.append(event({"type": "message_delta", "delta": finish, "usage": {"output_tokens": output_tokens}}))
    return [*events, event({"type": "message_stop"})]
