"""Mapping HTTP failures of any provider SDK onto the one taxonomy."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from providers.egress import refusal_in
from providers.errors import ErrorCategory, ProviderError

CONTEXT_HINTS = ("context_length_exceeded", "maximum context length", "prompt is too long", "too many tokens")
FILTER_HINTS = ("content_filter", "content_policy", "responsible ai policy", "safety system")
MODEL_HINTS = ("model_not_found", "does not exist", "deploymentnotfound", "no such model", "unknown model")


def category_for_status(status: int, body: Any) -> ErrorCategory:
    text = _body_text(body).lower()
    if status == 400 or status == 413 or status == 422:
        if any(hint in text for hint in CONTEXT_HINTS):
            return ErrorCategory.CONTEXT_LENGTH_EXCEEDED
        if any(hint in text for hint in FILTER_HINTS):
            return ErrorCategory.CONTENT_FILTERED
        return ErrorCategory.BAD_REQUEST
    fixed = {
        401: ErrorCategory.AUTHENTICATION,
        402: ErrorCategory.PERMISSION,  # payment required: the account may not use it
        403: ErrorCategory.PERMISSION,
        404: ErrorCategory.MODEL_NOT_FOUND,
        408: ErrorCategory.TIMEOUT,
        429: ErrorCategory.RATE_LIMITED,
        503: ErrorCategory.OVERLOADED,
        529: ErrorCategory.OVERLOADED,  # Anthropic's "overloaded_error"
    }
    if status in fixed:
        if status == 403 and any(hint in text for hint in FILTER_HINTS):
            return ErrorCategory.CONTENT_FILTERED
        return fixed[status]
    if status >= 500:
        return ErrorCategory.SERVER_ERROR
    return ErrorCategory.UNKNOWN


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


def retry_after_seconds(headers: Any, now: datetime | None = None) -> float | None:
    """The longest wait any of the providers' back-off headers asks for, in seconds.

    Understands Retry-After (seconds or HTTP date), retry-after-ms, OpenAI's
    x-ratelimit-reset-* durations ("6m0s", "20ms") and Anthropic's
    anthropic-ratelimit-*-reset timestamps (RFC 3339).
    """
    if headers is None:
        return None
    now = now or datetime.now(UTC)
    waits: list[float] = []
    for name, value in headers.items():
        name = name.lower()
        if name == "retry-after-ms":
            waits += _number(value, scale=0.001)
        elif name == "retry-after":
            waits += _number(value) or _http_date(value, now)
        elif name.startswith("x-ratelimit-reset"):
            waits += _duration(value)
        elif name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            waits += _timestamp(value, now)
    return max(waits) if waits else None


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
        error = ProviderError(ErrorCategory.EGRESS_REFUSED, str(refusal))
    elif isinstance(exc, sdk.APIStatusError):
        error = ProviderError(
            category_for_status(exc.status_code, exc.body),
            error_message(exc.status_code, exc.body),
            retry_after=retry_after_seconds(exc.response.headers),
        )
    elif isinstance(exc, sdk.APITimeoutError):  # before APIConnectionError, its parent
        error = ProviderError(ErrorCategory.TIMEOUT, "the provider did not answer in time")
    elif isinstance(exc, sdk.APIConnectionError):
        error = ProviderError(ErrorCategory.CONNECTION, "could not connect to the provider")
    elif isinstance(exc, (sdk.APIResponseValidationError, ValueError)):
        error = ProviderError(ErrorCategory.SERVER_ERROR, f"malformed response: {type(exc).__name__}")
    if error is not None:
        error.raw_request = request_record
    return error


def failure(category: ErrorCategory, message: str, request_record: dict) -> ProviderError:
    error = ProviderError(category, message)
    error.raw_request = request_record
    return error
