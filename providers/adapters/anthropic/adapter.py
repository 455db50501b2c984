"""Anthropic's Messages API."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import anthropic

from providers.adapters.base import Adapter
from providers.adapters.config import (
    COMMON_KEYS,
    HTTP_KEYS,
    THINKING_BUDGET_MIN,
    billed_output_tokens,
    integer,
    solver_of,
    unsent_warnings,
)
from providers.adapters.http_errors import failure, translate_sdk_error
from providers.adapters.streaming import (
    StreamClock,
    cut_error,
    provider_http_client,
    read_response,
    rehearsal_client,
    tokens_per_second,
)
from providers.adapters.timeouts import timeout_key, timeouts_from_key, try_timeout
from providers.adapters.tool_calls import tool_call
from providers.errors import ErrorCategory
from providers.types import Completion, CompletionRequest, Message, Tool, ToolCall, ToolResult, Usage

SAMPLING = ("temperature", "top_p")
THINKING_TOP_P_MIN = 0.95
# The request builder's max_tokens when an arm sets none (experiments/prompts.py).
DEFAULT_MAX_TOKENS = CompletionRequest.__dataclass_fields__["max_output_tokens"].default


class AnthropicAdapter(Adapter):
    name = "anthropic"
    needs_credential = True
    test_model = "claude-haiku-4-5"
    config_keys = (
        COMMON_KEYS
        | HTTP_KEYS
        | {
            "thinking_budget_tokens": integer(
                THINKING_BUDGET_MIN,
                1_000_000,
                label="Thinking budget (tokens)",
                help="Extended thinking: less than max output tokens, and no temperature with it",
            )
        }
    )

    @classmethod
    def config_errors(cls, model_name: str, config: dict) -> list[str]:
        """Anthropic's own rules for extended thinking, so the arm is refused at save rather
        than every call being refused with a 400."""
        errors = super().config_errors(model_name, config)
        budget = config.get("thinking_budget_tokens")
        if budget is not None and solver_of(config) == "agent":
            errors.append(AGENT_THINKING_REFUSAL)
        if not isinstance(budget, int) or errors:
            return errors
        max_tokens = config.get("max_tokens", DEFAULT_MAX_TOKENS)
        if budget >= max_tokens:
            errors.append(f"config.thinking_budget_tokens must be less than max_tokens ({max_tokens})")
        if "temperature" in config:
            errors.append("config.temperature is not allowed with thinking_budget_tokens (Anthropic refuses both)")
        return errors

    def client(self) -> anthropic.Anthropic:
        credential = self.credential
        return _anthropic_client(
            credential.api_key if credential else "",
            credential.base_url if credential and credential.base_url else None,
            timeout_key(self.arm.config),
        )

    def params(self, request: CompletionRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.arm.model_name,
            "max_tokens": request.max_output_tokens,
            "messages": [anthropic_message(m) for m in request.messages],
        }
        optional = {
            "system": request.system or None,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stop_sequences": list(request.stop) or None,
        }
        params |= {k: v for k, v in optional.items() if v is not None}
        for name in self.unsent_settings(request):
            params.pop(name)
        budget = self.arm.config.get("thinking_budget_tokens")
        if budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if request.tools:
            # No tool_choice: "auto", the default, lets the model answer or call. An agent's
            # turn is never structured output: its answer is its calls and, in the end, a diff.
            params["tools"] = [anthropic_tool(tool) for tool in request.tools]
        elif request.response_schema:
            # Anthropic's structured output is a tool the model must call with that input.
            params["tools"] = [
                {
                    "name": request.response_schema_name,
                    "description": "Record the answer.",
                    "input_schema": request.response_schema,
                }
            ]
            forced = {"type": "tool", "name": request.response_schema_name}
            params["tool_choice"] = {"type": "auto"} if budget else forced
        if self.arm.config.get("stream", True):
            params["stream"] = True
        return params

    def unsent_settings(self, request: CompletionRequest) -> dict[str, str]:
        """The request's settings extended thinking refuses, with why: a changed temperature
        (a prompt's default included) and a top_p below 0.95. Never sent, named as warnings."""
        if not self.arm.config.get("thinking_budget_tokens"):
            return {}
        unsent = {}
        if request.temperature is not None:
            unsent["temperature"] = "Anthropic refuses it with extended thinking (thinking_budget_tokens)"
        if request.top_p is not None and request.top_p < THINKING_TOP_P_MIN:
            unsent["top_p"] = f"Anthropic takes only {THINKING_TOP_P_MIN} to 1 with extended thinking"
        return unsent

    def sent_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The JSON body as the SDK sends it: ``extra_body`` merged over the arguments."""
        return self.params(request) | self.arm.config.get("extra_body", {})

    def billed_output_tokens(self, request: CompletionRequest) -> int:
        return billed_output_tokens(self.sent_body(request))

    def warm(self) -> None:
        _rehearse_once()
        self.sdk_create()

    def sdk_create(self) -> Any:
        """The SDK's create method on the (cached) client, built before any try's clock starts."""
        return self.client().messages.with_raw_response.create

    def generate(self, request: CompletionRequest) -> Completion:
        params = self.params(request)
        # SDK 2.x no longer takes temperature / top_p as arguments; models that still accept
        # them get them in the body, which is also what the raw record shows.
        sampling = {k: params[k] for k in SAMPLING if k in params}
        arguments = {k: v for k, v in params.items() if k not in SAMPLING}
        extra_body = sampling | self.arm.config.get("extra_body", {})
        try:
            create = self.sdk_create()
            clock = StreamClock()
            raw = create(
                **arguments,
                extra_body=extra_body or None,
                timeout=try_timeout(self.arm.config, self.seconds_left()),
            )
            streaming = bool(params.get("stream"))
            whole = anthropic.types.Message  # a server that ignored stream: true sent one
            response, streamed = read_response(raw, streaming, self.deadline, clock, read_anthropic_stream, whole)
        except Exception as exc:
            error = translate_sdk_error(exc, anthropic, params)
            if error is None:
                raise
            raise error from None
        latency_ms = clock.elapsed_ms()
        if isinstance(response, dict):
            body = response
        else:
            body = response.model_dump(mode="json", exclude_none=True) if hasattr(response, "model_dump") else {}
        if streamed and body.get("type") != "message":
            raise cut_error(params)  # no message_stop: the connection closed mid-answer
        if body.get("stop_reason") == "refusal":
            raise failure(ErrorCategory.CONTENT_FILTERED, "the model refused to answer", params)
        blocks = body.get("content") or []
        # An agent's turn: its tool_use blocks are calls; otherwise one is structured output.
        text = _text_of(blocks) if request.tools else _answer_text(blocks)
        usage = body.get("usage") or {}
        counts = anthropic_usage(usage)
        first_token_ms = clock.first_token_ms() if streamed else None
        return Completion(
            text=text,
            tool_calls=tool_calls_of(blocks) if request.tools else (),
            finish_reason=body.get("stop_reason") or "",
            usage=counts,
            latency_ms=latency_ms,
            first_token_ms=first_token_ms,
            output_tokens_per_s=tokens_per_second(counts.output_tokens, latency_ms, first_token_ms),
            cost_usd=None,
            model_served=body.get("model") or self.arm.model_name,
            request_id=raw.headers.get("request-id", "") or body.get("id", ""),
            raw_request=params,
            raw_response=body,
            warnings=unsent_warnings(self.unsent_settings(request)),
        )


# The deltas that carry generated tokens: the answer, the reasoning, a forced tool call's input.
TOKEN_DELTAS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def read_anthropic_stream(stream: Any, clock: StreamClock) -> dict:
    """The events of a Messages stream assembled into the message the same request would
    have returned unstreamed: message_start's message, its content blocks filled in from
    their deltas, message_delta's stop reason and usage. ``ping`` never reaches here (the SDK
    drops it) and an ``error`` event is raised by the SDK as a status error.

    Without message_stop the stream was cut, and the result is not a message at all."""
    message: dict = {}
    blocks: dict[int, dict] = {}
    tool_json: dict[int, list[str]] = {}
    finished = False
    for event in stream:
        data = event.model_dump(mode="json", exclude_none=True)
        kind, index = data.get("type"), data.get("index", 0)
        if kind == "message_start":
            message = data.get("message") or {}
        elif kind == "content_block_start":
            blocks[index] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            _apply_delta(blocks.setdefault(index, {}), tool_json.setdefault(index, []), data.get("delta") or {}, clock)
        elif kind == "message_delta":
            message |= {k: v for k, v in (data.get("delta") or {}).items() if v is not None}
            # Cumulative counts; newer servers repeat the input side here too.
            message["usage"] = (message.get("usage") or {}) | (data.get("usage") or {})
        elif kind == "message_stop":
            finished = True
    if not finished:
        return {}
    for index, parts in tool_json.items():
        if "".join(parts).strip():  # no input_json_delta text: the start's input ({}) stands
            blocks[index]["input"] = _streamed_input("".join(parts))
    return message | {"type": "message", "content": [blocks[index] for index in sorted(blocks)]}


def _apply_delta(block: dict, tool_json: list[str], delta: dict, clock: StreamClock) -> None:
    kind = delta.get("type")
    if kind in TOKEN_DELTAS and delta.get(TOKEN_DELTAS[kind]):
        clock.token()
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta.get("text", "")
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
    elif kind == "signature_delta":
        block["signature"] = delta.get("signature", "")
    elif kind == "input_json_delta":
        tool_json.append(delta.get("partial_json", ""))


def _streamed_input(text: str) -> Any:
    """A tool_use block's input from its input_json_delta pieces. JSON that does not parse
    (cut by max_tokens mid-call) stays the text as sent, for the call to be malformed."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _answer_text(blocks: list[dict]) -> str:
    """The text blocks, or a forced tool call's input as JSON (structured output): as the
    text it was streamed as when that is not JSON, which the reader then refuses as such.

    ``thinking`` and ``redacted_thinking`` blocks are the model's reasoning, not its answer:
    they stay in the raw response only."""
    tool_inputs = [block.get("input") for block in blocks if block.get("type") == "tool_use"]
    if tool_inputs:
        return tool_inputs[0] if isinstance(tool_inputs[0], str) else json.dumps(tool_inputs[0])
    return _text_of(blocks)


def _text_of(blocks: list[dict]) -> str:
    return "".join(block.get("text", "") for block in blocks if block.get("type") == "text")


# Extended thinking with tools needs each turn's thinking blocks sent back with its tool_use
# blocks, signed; the normalised history carries no thinking, so an agent arm cannot have it.
AGENT_THINKING_REFUSAL = (
    "config.thinking_budget_tokens cannot be used on an agent arm (config.solver agent): Anthropic needs "
    "each turn's thinking blocks sent back with its tool calls, which the agent's history does not carry"
)


def anthropic_tool(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def anthropic_message(message: Message) -> dict[str, Any]:
    """One of our messages as Anthropic's: an assistant turn's text (if any) then a tool_use
    block per call; the user turn answering them, a tool_result block per result first (as
    Anthropic requires), then its text. A message without either stays plain text."""
    if message.tool_results:
        results: list[dict[str, Any]] = [_tool_result(result) for result in message.tool_results]
        text = [{"type": "text", "text": message.content}] if message.content else []
        return {"role": message.role, "content": results + text}
    if message.tool_calls:
        text = [{"type": "text", "text": message.content}] if message.content else []
        return {"role": message.role, "content": text + [_tool_use(call) for call in message.tool_calls]}
    return {"role": message.role, "content": message.content}


def _tool_result(result: ToolResult) -> dict[str, Any]:
    content, is_error = result.content, result.is_error
    return {"type": "tool_result", "tool_use_id": result.call_id, "content": content, "is_error": is_error}


def _tool_use(call: ToolCall) -> dict[str, Any]:
    # A malformed call's text cannot be a tool_use input (an object): it goes back empty, and
    # its tool_result tells the model what was wrong with it.
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}


def tool_calls_of(blocks: list[dict]) -> tuple[ToolCall, ...]:
    """The answer's tool_use blocks, streamed or not."""
    uses = [block for block in blocks if block.get("type") == "tool_use"]
    return tuple(
        tool_call(use.get("id") or "", use.get("name") or "", use.get("input"), position)
        for position, use in enumerate(uses)
    )


# A whole Messages stream, event for event, as short as Anthropic writes one: what the rehearsal reads.
REHEARSAL_STREAM = b"".join(
    b"event: %s\ndata: %s\n\n" % (event.encode(), json.dumps(data | {"type": event}).encode())
    for event, data in (
        (
            "message_start",
            {
                "message": {
                    "id": "rehearsal",
                    "type": "message",
                    "role": "assistant",
                    "model": "rehearsal",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 1, "output_tokens": 0},
                }
            },
        ),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ("message_stop", {}),
    )
)


@lru_cache(maxsize=1)
def _rehearse_once() -> None:
    """One streamed call through the Anthropic SDK answered in memory, once per process: the
    first real call's clock then measures the provider, not the SDK warming up."""
    client = anthropic.Anthropic(
        api_key="rehearsal", base_url="http://rehearsal.invalid", http_client=rehearsal_client(REHEARSAL_STREAM)
    )
    with client:
        raw = client.messages.with_raw_response.create(
            model="rehearsal", max_tokens=1, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        read_anthropic_stream(raw.parse(), StreamClock())


@lru_cache(maxsize=256)
def _anthropic_client(api_key: str, base_url: str | None, timeouts: tuple[float, float]) -> anthropic.Anthropic:
    # Reused for the same reason as the OpenAI clients: building one costs tens of ms.
    timeout = timeouts_from_key(timeouts)
    return anthropic.Anthropic(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=timeout,
        http_client=provider_http_client(timeout),
    )


def anthropic_usage(usage: dict) -> Usage:
    """Anthropic's ``input_tokens`` leaves out the cache reads and the cache writes; ours is
    the whole prompt, with both as parts of it, each billed at its own price. The writes'
    ``cache_creation`` splits them by lifetime (1-hour entries cost more), and
    ``output_tokens_details.thinking_tokens`` is the thinking inside ``output_tokens``."""
    cache_read = usage.get("cache_read_input_tokens") or 0
    cache_write = usage.get("cache_creation_input_tokens") or 0
    return Usage(
        input_tokens=(usage.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=usage.get("output_tokens") or 0,
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=(usage.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") or 0,
        reasoning_tokens=(usage.get("output_tokens_details") or {}).get("thinking_tokens") or 0,
    )
