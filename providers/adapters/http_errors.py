"""Mapping HTTP failures of any provider SDK onto the one taxonomy."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx2

from prbench.egress import refusal_in
from providers.adapters.error_answers import answer_category, answer_for_status
from providers.adapters.streaming import DeadlinePassed, StreamCut, connection_broke, cut_error
from providers.errors import ErrorCategory, ProviderError


def category_for_status(status: int, body: Any) -> ErrorCategory:
    """An HTTP error status and its body, as the table of answers (error_answers.py) has it."""
    return answer_for_status(status, _body_text(body).lower()).category


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body)
    except (TypeError, ValueError):
        return str(body)


def error_message(status: int, body: Any) -> str:
    """The provider's own error text (never request headers, so never a key), shortened."""
    message = ""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    return f"HTTP {status}: {message or _body_text(body)}"[:500]


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$")


def retry_after_seconds(headers: Any, status: int = 429, now: datetime | None = None) -> float | None:
    """How long the provider asked us to wait before the next try, in seconds, or None for
    "nothing said: back off exponentially".

    As the official openai and anthropic SDKs do, an explicit ``retry-after-ms`` wins, then
    ``retry-after`` (seconds or an HTTP date); a value of 0 or less is no request at all.
    Where neither is given, a 429's rate-limit reset headers say when the exhausted limit
    refills (``rate_limit_reset_seconds``). Other statuses (503, 529) carry the same reset
    headers on every answer, but they describe quotas, not the outage, so they are ignored.
    """
    if headers is None:
        return None
    now = now or datetime.now(UTC)
    explicit = _explicit_retry_after(headers, now)
    if explicit is not None:
        return explicit
    return rate_limit_reset_seconds(headers, now) if status == 429 else None


def _explicit_retry_after(headers: Any, now: datetime) -> float | None:
    milliseconds = _number(headers.get("retry-after-ms") or "", scale=0.001)
    if milliseconds:
        return milliseconds[0] if milliseconds[0] > 0 else None
    value = headers.get("retry-after") or ""
    seconds = _number(value) or _http_date(value, now)
    return seconds[0] if seconds and seconds[0] > 0 else None


# Each limit's "remaining" header and its "reset" header: OpenAI's durations ("6m0s") and
# Anthropic's RFC 3339 timestamps.
RESET_HEADERS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
    ("anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"),
)


def rate_limit_reset_seconds(headers: Any, now: datetime | None = None) -> float | None:
    """When the limit that refused us refills: the reset of a limit whose remaining count is
    0 (the longest, if several are exhausted: the call needs all of them); when none says 0,
    the soonest reset, since retrying early costs one cheap 429 and waiting late costs time."""
    now = now or datetime.now(UTC)
    exhausted: list[float] = []
    others: list[float] = []
    for remaining_name, reset_name in RESET_HEADERS:
        reset = _reset(reset_name, headers.get(reset_name) or "", now)
        if not reset or reset[0] <= 0:
            continue
        remaining = _number(headers.get(remaining_name) or "")
        (exhausted if remaining and remaining[0] < 1 else others).append(reset[0])
    if exhausted:
        return max(exhausted)
    return min(others) if others else None


def _reset(name: str, value: str, now: datetime) -> list[float]:
    return _timestamp(value, now) if name.startswith("anthropic-") else _duration(value)


def _number(value: str, scale: float = 1.0) -> list[float]:
    try:
        return [max(0.0, float(value) * scale)]
    except ValueError:
        return []


def _http_date(value: str, now: datetime) -> list[float]:
    try:
        return [max(0.0, (parsedate_to_datetime(value) - now).total_seconds())]
    except (TypeError, ValueError):
        return []


def _duration(value: str) -> list[float]:
    match = DURATION.match(value.strip())
    if not match or not any(match.groups()):
        return _number(value)
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
    return [hours * 3600 + minutes * 60 + seconds + millis / 1000]


def _timestamp(value: str, now: datetime) -> list[float]:
    try:
        return [max(0.0, (datetime.fromisoformat(value.replace("Z", "+00:00")) - now).total_seconds())]
    except ValueError:
        return []


def translate_sdk_error(exc: Exception, sdk: Any, request_record: dict) -> ProviderError | None:
    """The taxonomy's view of an exception from an official SDK (``openai`` or ``anthropic``:
    both generate the same exception hierarchy), or None when it is not one of theirs."""
    error: ProviderError | None = None
    refusal = refusal_in(exc)
    if refusal is not None:  # first: the SDK may have wrapped it as a connection error
        # Nothing answered (no socket was opened), so there is no body to quote: the message
        # names the host, the refused address and the setting, and nothing else.
        error = ProviderError(answer_category("egress_refused"), str(refusal))
    elif isinstance(exc, StreamCut):
        return cut_error(request_record)
    elif isinstance(exc, DeadlinePassed):
        error = ProviderError(answer_category("total_timeout"), "the answer was still streaming at the total timeout")
    elif isinstance(exc, sdk.APIStatusError) and 200 <= exc.status_code < 300:
        error = stream_error(exc.body)  # an error event inside a 200 stream (Anthropic's "error")
    elif isinstance(exc, sdk.APIStatusError):
        error = ProviderError(
            category_for_status(exc.status_code, exc.body),
            error_message(exc.status_code, exc.body),
            retry_after=retry_after_seconds(exc.response.headers, exc.status_code),
        )
    elif isinstance(exc, (sdk.APITimeoutError, httpx2.TimeoutException)):  # before their parents
        error = timeout_failure(exc)
    elif isinstance(exc, (sdk.APIConnectionError, httpx2.TransportError)) and connection_broke(exc):
        error = ProviderError(answer_category("stream_cut"), BROKE_OFF)
    elif isinstance(exc, (sdk.APIConnectionError, httpx2.TransportError)):
        error = ProviderError(answer_category("no_connection"), connection_failure(exc))
    elif isinstance(exc, (sdk.APIResponseValidationError, ValueError)):
        error = ProviderError(answer_category("malformed"), f"malformed response: {type(exc).__name__}")
    elif isinstance(exc, sdk.APIError):  # an error chunk mid-stream (OpenAI's SDK raises it bare)
        error = stream_error({"error": exc.body})
    if error is not None:
        error.raw_request = request_record
    return error


# A connection that was made and then closed or reset before the whole answer came (an
# unstreamed body cut short, a server that hung up on the request): not "could not connect".
BROKE_OFF = "the connection to the provider broke before the answer was complete"


# Timeouts before the request reached the provider: no connection in time, none free in our
# pool, or the request could not be written in time. The provider never had it.
NOT_SENT = (httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.WriteTimeout)


def timeout_failure(exc: BaseException) -> ProviderError:
    """A timeout, by where it struck: before the request reached the provider it is the
    connection's (as a refused connection is); once the provider had it, the model's. The
    SDKs raise their APITimeoutError ``from`` the httpx timeout, which says which."""
    if isinstance(_cause(exc, httpx2.TimeoutException), NOT_SENT):
        return ProviderError(answer_category("connect_timeout"), connection_failure(exc, "timed out"))
    return ProviderError(answer_category("read_timeout"), "the model did not answer within the read timeout")


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``'s chain of causes (``exc`` itself included)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def connection_failure(exc: BaseException, reason: str = "") -> str:
    """Why no connection was made, as a person fixing it needs to read it: where to (the
    request's host and port, never its path or query, which may carry a key) and what the
    system said ("could not connect to the provider at 127.0.0.1:9: connection refused")."""
    url = getattr(getattr(exc, "request", None), "url", None)
    host = getattr(url, "host", "")
    port = getattr(url, "port", None)
    where = (f" at {host}:{port}" if port else f" at {host}") if host else ""
    reason = reason or _os_reason(exc)
    return f"could not connect to the provider{where}" + (f": {reason}" if reason else "")


def _os_reason(exc: BaseException) -> str:
    """The operating system's reason at the root of the SDK's exception ("connection
    refused", "name or service not known"), or ""."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError) and current.strerror:
            return current.strerror.lower()
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return ""


# The HTTP status each documented error type is sent with when it comes before the stream
# (docs.anthropic.com "Errors"; OpenAI's error types), so an error event in the middle of a
# stream maps to the category the same error would have as a status.
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def stream_error(body: Any) -> ProviderError:
    """An error the provider sent inside a stream that had begun with 200: by its numeric
    ``code`` (OpenRouter sends the upstream status), else its ``type``; a server error when
    it names neither, since the provider broke off what it had started."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error if isinstance(error, dict) else {}
    code = details.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else None
    status = status or ERROR_TYPE_STATUS.get(str(details.get("type") or code or ""), 500)
    category = category_for_status(status, body)
    name = details.get("type") or code or "unnamed"
    return ProviderError(category, f"error mid-stream ({name}): {details.get('message') or _body_text(body)}"[:500])


def failure(category: ErrorCategory, message: str, request_record: dict) -> ProviderError:
    error = ProviderError(category, message)
    error.raw_request = request_record
    return error
