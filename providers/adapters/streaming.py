"""What every streaming (SSE) adapter shares: the call's deadline enforced between network
reads, the clock that gives latency, time to first token and output speed, and the test for a
server that ignored ``stream: true`` and answered with one JSON body."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx2

from prbench import egress
from providers.adapters.error_answers import answer_category
from providers.errors import ProviderError

# Where the HTTP client's request hook notes when a request went out (httpx passes a
# request's extensions through to its response, so the adapter reads it back there).
SENT_AT = "prbench_sent_at"


def mark_sent(request: httpx2.Request) -> None:
    """The request hook of every provider client: runs once the SDK has built the request,
    just before it is written to the connection."""
    request.extensions[SENT_AT] = time.perf_counter()


def provider_http_client(timeout: httpx2.Timeout) -> httpx2.Client:
    """The egress-checked client the adapters hand their SDK, noting when each request is sent."""
    client = egress.http_client(timeout)
    client.event_hooks = {"request": [mark_sent], "response": []}
    return client


class DeadlinePassed(Exception):
    """The call's total timeout ran out while the answer was still arriving."""


class StreamCut(Exception):
    """The connection broke while a streamed answer was arriving: the provider had answered
    and stopped mid-way, which is not a failure to connect."""


# What httpx raises once a connection was open and then failed: the peer closed it early or
# reset it (ConnectError and the timeouts are something else: no connection, or no answer).
BROKEN_CONNECTION = (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError)


def connection_broke(exc: BaseException) -> bool:
    """Whether an SDK's exception (its own type wraps httpx's) comes from a connection that
    was open and broke, rather than one never made."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BROKEN_CONNECTION):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


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
    clock.request_sent(raw.http_response)
    if not streaming:
        return raw.parse(), False
    if is_event_stream(raw.http_response):
        enforce_deadline(raw.http_response, deadline)
        try:
            return read_stream(raw.parse(), clock), True
        except Exception as exc:
            if connection_broke(exc):  # the OpenAI SDK words it as a failure to connect
                raise StreamCut from None
            raise
    return body_type.construct(**whole_body(raw.http_response)), False


def whole_body(response: Any) -> dict:
    """The JSON object a server that ignored ``stream: true`` sent instead of a stream."""
    body = json.loads(response.read())
    if not isinstance(body, dict):
        raise ValueError("the response body is not a JSON object")
    return body


CUT_STREAM = "the stream was cut before the answer was complete (the provider closed the connection mid-answer)"


def cut_error(request_record: dict) -> ProviderError:
    """A stream that ended, or broke, mid-answer. Retryable: the provider dropped the
    connection; a truncated answer is never a success."""
    error = ProviderError(answer_category("stream_cut"), CUT_STREAM)
    error.raw_request = request_record
    return error


def rehearsal_client(stream: bytes) -> httpx2.Client:
    """A client that sends nothing anywhere: every request is answered in memory with
    ``stream`` as a 200 event stream. An adapter runs one call of its SDK through it per
    process (``Adapter.warm``), so the SDK's first-use work (lazy imports, its request
    builder's and its stream decoder's caches) is done before any call is timed."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=stream)

    return httpx2.Client(transport=httpx2.MockTransport(answer))


class StreamClock:
    """One try's timing, from the moment its request was sent: neither building the SDK's
    client nor the SDK's own work before sending (lazy imports, request building, both slow on
    a process's first call) is the provider's time."""

    def __init__(self) -> None:
        self.started = time.perf_counter()  # until the request hook says when it was sent
        self.first_token: float | None = None

    def request_sent(self, response: Any) -> None:
        """Start from when the response's request went out, as ``mark_sent`` noted it."""
        sent_at = response.request.extensions.get(SENT_AT)
        if isinstance(sent_at, float):
            self.started = sent_at

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
