"""What every streaming (SSE) adapter shares: the call's deadline enforced between network
reads, the clock that gives time to first token and output speed, and the test for a server
that ignored ``stream: true`` and answered with one JSON body."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx2

from providers.adapters.error_answers import answer_category
from providers.errors import ProviderError


class DeadlinePassed(Exception):
    """The call's total timeout ran out while the answer was still arriving."""


class _DeadlineByteStream(httpx2.SyncByteStream):
    """The response's byte stream, checked against the deadline after every network read.

    The read timeout bounds a read that stalls; this bounds a server that keeps trickling
    bytes, which no read timeout ever fires on. The SDKs' SSE decoders hand back control only
    per whole event, so the check sits below them, on the raw reads."""

    def __init__(self, inner: Any, deadline: float):
        self.inner = inner
        self.deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            if time.monotonic() > self.deadline:
                raise DeadlinePassed
            yield chunk

    def close(self) -> None:
        self.inner.close()


def enforce_deadline(response: Any, deadline: float | None) -> None:
    """Before the body is read: cut the stream once the call's deadline has passed."""
    if deadline is not None:
        response.stream = _DeadlineByteStream(response.stream, deadline)


def is_event_stream(response: Any) -> bool:
    """Whether the server streamed. Some self-hosted servers ignore ``stream: true`` and send
    the whole answer as JSON, which is then read as a whole body."""
    return response.headers.get("content-type", "").split(";")[0].strip().lower() == "text/event-stream"


def read_response(
    raw: Any, streaming: bool, deadline: float | None, clock: StreamClock, read_stream: Any, body_type: Any
) -> tuple[Any, bool]:
    """The SDK's raw response read as the answer, and whether it streamed: ``read_stream``
    assembles a stream (cut at ``deadline``), ``body_type`` holds the whole JSON body of a
    server that ignored ``stream: true``, and an unstreamed request is parsed as usual."""
    if not streaming:
        return raw.parse(), False
    if is_event_stream(raw.http_response):
        enforce_deadline(raw.http_response, deadline)
        return read_stream(raw.parse(), clock), True
    return body_type.construct(**whole_body(raw.http_response)), False


def whole_body(response: Any) -> dict:
    """The JSON object a server that ignored ``stream: true`` sent instead of a stream."""
    body = json.loads(response.read())
    if not isinstance(body, dict):
        raise ValueError("the response body is not a JSON object")
    return body


def cut_error(request_record: dict) -> ProviderError:
    # Retryable: the provider dropped the connection; a truncated answer is never a success.
    error = ProviderError(answer_category("stream_cut"), "the stream ended before the answer was complete")
    error.raw_request = request_record
    return error


class StreamClock:
    """One try's timing, from just before its request is sent."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_token: float | None = None

    def token(self) -> None:
        """A content or thinking delta arrived; only the first one counts."""
        if self.first_token is None:
            self.first_token = time.perf_counter()

    def elapsed_ms(self) -> int:
        return round((time.perf_counter() - self.started) * 1000)

    def first_token_ms(self) -> int | None:
        return None if self.first_token is None else round((self.first_token - self.started) * 1000)


def tokens_per_second(output_tokens: int, latency_ms: int, first_token_ms: int | None) -> float | None:
    """Output speed once the first token is out: None when it cannot be measured (no token
    seen, no tokens counted, or the whole answer arrived within one millisecond)."""
    if first_token_ms is None or not isinstance(output_tokens, int) or output_tokens <= 0:
        return None
    generating_ms = latency_ms - first_token_ms
    if generating_ms <= 0:
        return None
    return round(output_tokens * 1000 / generating_ms, 2)
