"""Streams as the providers write them, event for event.

OpenAI: chat.completion.chunk objects (``usage: null`` on each when include_usage is asked
for), the finish_reason in a chunk with an empty delta, then one chunk with empty
``choices`` and the usage, then ``data: [DONE]`` (platform.openai.com "Streaming" and the
CreateChatCompletionStreamResponse schema). OpenRouter adds ``: OPENROUTER PROCESSING``
comment lines while it waits, and ``cost`` in the usage. Anthropic: named events,
message_start (input and cache counts), content blocks with their deltas, ``ping``,
message_delta (stop reason, output count), message_stop (docs.anthropic.com "Streaming
Messages").
"""

from __future__ import annotations

from tests.providers.fake_server import sse


def openai_chunk(choices: list, usage: dict | None = None, model: str = "served-model") -> dict:
    return {
        "id": "chatcmpl-stream-42",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": choices,
        "usage": usage,
    }


def openai_delta(delta: dict, finish_reason: str | None = None) -> dict:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


OPENAI_USAGE = {
    "prompt_tokens": 11,
    "completion_tokens": 7,
    "total_tokens": 18,
    "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
}


def openai_events(
    pieces: tuple[str, ...] = ("diff --git", " a/x b/x"),
    usage: dict | None = OPENAI_USAGE,
    finish_reason: str = "stop",
    model: str = "served-model",
) -> list[str]:
    events = [sse(openai_chunk([openai_delta({"role": "assistant", "content": "", "refusal": None})], model=model))]
    events += [sse(openai_chunk([openai_delta({"content": piece})], model=model)) for piece in pieces]
    events.append(sse(openai_chunk([openai_delta({}, finish_reason)], model=model)))
    if usage is not None:
        events.append(sse(openai_chunk([], usage, model=model)))
    return [*events, sse("[DONE]")]


def openrouter_events(cost: float = 0.00042) -> list[str]:
    usage = OPENAI_USAGE | {"cost": cost, "is_byok": False, "cost_details": {"upstream_inference_cost": None}}
    return [": OPENROUTER PROCESSING\n\n", ": OPENROUTER PROCESSING\n\n", *openai_events(usage=usage)]


def anthropic_start(input_tokens: int = 11, cache_read: int = 0, cache_write: int = 0) -> str:
    message: dict = {
        "id": "msg_stream_42",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "served-model",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "output_tokens": 1,
        },
    }
    return sse({"type": "message_start", "message": message}, "message_start")


def anthropic_block(index: int, block: dict, deltas: list[dict]) -> list[str]:
    events = [sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")]
    events += [
        sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta") for delta in deltas
    ]
    return [*events, sse({"type": "content_block_stop", "index": index}, "content_block_stop")]


def anthropic_end(output_tokens: int = 7, stop_reason: str = "end_turn") -> list[str]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}}
    return [
        sse(delta | {"usage": {"output_tokens": output_tokens}}, "message_delta"),
        sse({"type": "message_stop"}, "message_stop"),
    ]


PING = sse({"type": "ping"}, "ping")


def anthropic_text_events(pieces: tuple[str, ...] = ("diff --git", " a/x b/x")) -> list[str]:
    text = [{"type": "text_delta", "text": piece} for piece in pieces]
    return [anthropic_start(), PING, *anthropic_block(0, {"type": "text", "text": ""}, text), *anthropic_end()]
