"""Streamed answers (SSE) through the gateway with the real SDKs, per adapter: the answer,
its usage and cost, time to first token and output speed; a stream cut mid-way; a server
that trickles past the total timeout; an error event mid-stream; streaming turned off."""

from __future__ import annotations

import json
import time
from datetime import date
from decimal import Decimal

import pytest

from providers.adapters.http_errors import BROKE_OFF
from providers.adapters.streaming import CUT_STREAM
from providers.errors import ErrorCategory, ProviderError
from providers.models import Price
from tests.providers.contracts import WIRES, call
from tests.providers.fake_server import Reply, sse
from tests.providers.sse_fixtures import (
    PING,
    anthropic_block,
    anthropic_end,
    anthropic_start,
    anthropic_text_events,
    openai_chunk,
    openai_delta,
    openai_events,
    openrouter_events,
)

# The adapters that speak OpenAI's chat.completion.chunk stream (all but Anthropic).
OPENAI_FORMAT = sorted(name for name in WIRES if name != "anthropic")


def stream_of(spec) -> list[str]:
    if spec.provider == "anthropic":
        return anthropic_text_events()
    if spec.provider == "openrouter":
        return openrouter_events()
    return openai_events()


def warm_up(org, spec, fake) -> None:
    """The SDK's first import and client are not what is being timed."""
    fake.script(Reply(events=stream_of(spec)))
    call(org, spec)
    fake.seen.clear()


def test_a_stream_is_assembled_into_the_answer(wire, fake):
    spec, org = wire
    fake.script(Reply(events=stream_of(spec), headers={"x-request-id": "req-9", "request-id": "req-9"}))
    completion = call(org, spec)
    assert completion.text == "diff --git a/x b/x"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 7)
    assert completion.model_served == "served-model" and completion.request_id == "req-9"
    assert completion.finish_reason in ("stop", "end_turn") and completion.warnings == ()
    sent = fake.seen[-1].body
    assert sent["stream"] is True
    if spec.provider == "anthropic":
        assert "stream_options" not in sent  # Anthropic streams usage unasked
    else:
        assert sent["stream_options"] == {"include_usage": True}
        assert completion.usage.cached_tokens == 4
    # The raw record is the body the unstreamed call would have had, not the chunks.
    raw = completion.raw_response
    assert raw["model"] == "served-model" and "chunk" not in json.dumps(raw)
    if spec.provider == "openrouter":
        assert completion.cost_usd == Decimal("0.00042") and completion.cost_source == "provider"


def test_time_to_first_token_and_output_speed(wire, fake):
    spec, org = wire
    warm_up(org, spec, fake)
    # Every event comes 60 ms after the one before: the first token is at least two events in.
    fake.script(Reply(events=stream_of(spec), piece_delay_s=0.06))
    completion = call(org, spec)
    assert completion.first_token_ms is not None and completion.first_token_ms >= 100
    assert completion.latency_ms >= completion.first_token_ms + 60  # the rest took at least one more event
    assert completion.wall_ms >= completion.latency_ms
    # 7 tokens over at least 60 ms after the first: at most 7 / 0.06 s; and measured, not absent.
    assert completion.output_tokens_per_s is not None and 0 < completion.output_tokens_per_s <= 7 / 0.06
    generating_s = (completion.latency_ms - completion.first_token_ms) / 1000
    assert completion.output_tokens_per_s == pytest.approx(7 / generating_s, rel=0.01)


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_a_cut_stream_is_retried_and_never_a_truncated_success(wire, fake, framing):
    spec, org = wire
    events = stream_of(spec)
    cut_after = len(events) - 3  # an answer half sent: no finish reason, no message_stop
    fake.script(Reply(events=events, framing=framing, cut_after=cut_after, delay_s=0.15), Reply(events=events))
    completion = call(org, spec, max_retries=1, retry_base_ms=1)
    assert completion.text == "diff --git a/x b/x" and completion.retries == 1
    assert completion.retry_log[0]["category"] == ErrorCategory.CONNECTION
    # The wall time holds the cut try, which alone took 150 ms; the latency only the last try.
    assert completion.wall_ms >= completion.latency_ms + 150
    assert len(fake.seen) == 2


def test_a_cut_stream_without_retries_fails_with_its_wall_time(wire, fake):
    spec, org = wire
    events = stream_of(spec)
    fake.script(Reply(events=events, framing="close", cut_after=len(events) - 3, delay_s=0.1))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.CONNECTION
    assert caught.value.wall_ms is not None and caught.value.wall_ms >= 100


def test_a_trickling_stream_is_cut_at_the_total_timeout(wire, fake):
    spec, org = wire
    warm_up(org, spec, fake)
    # Three bytes every 20 ms: no read ever waits long enough for the read timeout to fire,
    # and the whole stream would take many seconds.
    fake.script(Reply(events=stream_of(spec), piece_bytes=3, piece_delay_s=0.02))
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(org, spec, timeout_read_s=30, timeout_total_s=0.5)
    elapsed = time.monotonic() - started
    assert caught.value.category == ErrorCategory.TIMEOUT
    assert 0.45 <= elapsed < 1.0


@pytest.mark.parametrize("wire", ["anthropic"], indirect=True)
def test_an_anthropic_error_event_mid_stream_is_overloaded(wire, fake):
    spec, org = wire
    error = sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")
    fake.script(Reply(events=[anthropic_start(), PING, error]))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.OVERLOADED and caught.value.retryable
    assert "Overloaded" in caught.value.message


@pytest.mark.parametrize("wire", OPENAI_FORMAT, indirect=True)
def test_an_openai_format_error_chunk_mid_stream_is_a_server_error(wire, fake):
    spec, org = wire
    # OpenRouter's documented mid-stream error: the upstream status as the error's code.
    error = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "served-model",
        "error": {"code": 502, "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    fake.script(Reply(events=[*openai_events()[:2], sse(error)]))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.SERVER_ERROR and caught.value.retryable
    assert "Provider disconnected" in caught.value.message


def test_stream_false_sends_an_unstreamed_request(wire, fake):
    spec, org = wire
    fake.script(Reply(200, spec.success))
    completion = call(org, spec, stream=False)
    assert "stream" not in fake.seen[-1].body and "stream_options" not in fake.seen[-1].body
    assert completion.text == "diff --git a/x b/x" and completion.first_token_ms is None
    assert completion.output_tokens_per_s is None and completion.wall_ms >= completion.latency_ms


def test_a_server_that_ignores_stream_true_is_read_as_one_body(wire, fake):
    spec, org = wire
    fake.script(Reply(200, spec.success))  # application/json, whatever was asked
    completion = call(org, spec)
    assert fake.seen[-1].body["stream"] is True
    assert completion.text == "diff --git a/x b/x" and completion.usage.output_tokens == 7
    assert completion.first_token_ms is None  # nothing streamed, nothing to time


@pytest.mark.parametrize("wire", OPENAI_FORMAT, indirect=True)
def test_an_openai_stream_without_usage_is_stored_as_zero_with_a_warning(wire, fake):
    spec, org = wire
    Price.objects.create(
        provider=spec.provider,
        model_pattern=spec.model,
        input_per_mtok=1,
        output_per_mtok=2,
        valid_from=date(2000, 1, 1),
    )
    fake.script(Reply(events=openai_events()))
    assert call(org, spec).cost_usd is not None  # priced when counted: what the next call lacks
    fake.script(Reply(events=openai_events(usage=None)))
    completion = call(org, spec)
    assert completion.text == "diff --git a/x b/x"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (0, 0)
    assert completion.cost_usd is None and completion.output_tokens_per_s is None
    assert any("no token counts" in warning for warning in completion.warnings)


@pytest.mark.parametrize("wire", OPENAI_FORMAT, indirect=True)
def test_an_openai_stream_filtered_mid_way_is_content_filtered(wire, fake):
    spec, org = wire
    fake.script(Reply(events=openai_events(finish_reason="content_filter")))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.CONTENT_FILTERED


@pytest.mark.parametrize("wire", ["openrouter"], indirect=True)
def test_an_openai_stream_of_reasoning_times_its_first_reasoning_token(wire, fake):
    spec, org = wire
    warm_up(org, spec, fake)
    thinking = sse(openai_chunk([openai_delta({"content": "", "reasoning": "Let me look."})]))
    events = openai_events()
    fake.script(Reply(events=[events[0], thinking, *events[1:]], piece_delay_s=0.1))
    completion = call(org, spec)
    # The reasoning chunk is the second event of seven, the first answer text the third: the
    # rest of the stream after it takes at least 500 ms, after the answer's first only 400.
    assert completion.first_token_ms is not None and completion.latency_ms - completion.first_token_ms >= 470
    assert completion.text == "diff --git a/x b/x"


@pytest.mark.parametrize("wire", ["anthropic"], indirect=True)
def test_anthropic_thinking_tool_input_and_cache_tokens(wire, fake):
    spec, org = wire
    warm_up(org, spec, fake)
    thinking = anthropic_block(
        0,
        {"type": "thinking", "thinking": ""},
        [
            {"type": "thinking_delta", "thinking": "The bug is in x."},
            {"type": "signature_delta", "signature": "EqQBCgIYAhIM"},
        ],
    )
    tool = anthropic_block(
        1,
        {"type": "tool_use", "id": "toolu_01", "name": "answer", "input": {}},
        [
            {"type": "input_json_delta", "partial_json": ""},
            {"type": "input_json_delta", "partial_json": '{"patch": "diff'},
            {"type": "input_json_delta", "partial_json": ' --git"}'},
        ],
    )
    events = [anthropic_start(5, cache_read=100, cache_write=20), PING, *thinking, *tool]
    events += anthropic_end(42, stop_reason="tool_use")
    fake.script(Reply(events=events, piece_delay_s=0.03))
    completion = call(org, spec)
    assert json.loads(completion.text) == {"patch": "diff --git"}  # the forced tool's input, not the thinking
    usage = completion.usage
    counts = (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens, usage.output_tokens)
    assert counts == (125, 100, 20, 42)
    assert completion.finish_reason == "tool_use"
    blocks = completion.raw_response["content"]
    assert blocks[0] == {"type": "thinking", "thinking": "The bug is in x.", "signature": "EqQBCgIYAhIM"}
    assert blocks[1]["input"] == {"patch": "diff --git"}
    # The first token is the thinking delta (the fourth event), not the tool's input after it.
    assert completion.first_token_ms is not None and completion.latency_ms - completion.first_token_ms >= 200


def test_wires_cover_every_streaming_adapter():
    assert set(WIRES) == {"anthropic", "azure_openai", "openai", "openai_compatible", "openrouter"}


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_a_cut_stream_is_worded_as_one(wire, fake, framing):
    """Closed mid-answer, whether the chunked body breaks off or the unframed one just ends:
    the provider answered and stopped, which is not a connection never made (issue 26: the
    OpenAI SDK's error for a broken chunked stream read "could not connect")."""
    spec, org = wire
    events = stream_of(spec)
    fake.script(Reply(events=events, framing=framing, cut_after=len(events) - 3))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.CONNECTION
    assert caught.value.message == CUT_STREAM


def test_a_body_cut_short_is_not_a_failure_to_connect(wire, fake):
    """An unstreamed answer whose connection closes before the body it announced is whole."""
    spec, org = wire
    fake.script(Reply(body=spec.success, cut_body_at=20))
    with pytest.raises(ProviderError) as caught:
        call(org, spec, stream=False)
    assert caught.value.category == ErrorCategory.CONNECTION
    assert caught.value.message == BROKE_OFF
