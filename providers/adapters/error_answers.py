"""What each provider answer that is not a completion means: the one table of answers ->
error category (-> outcome class, providers/outcomes.py). ``category_for_status`` and
``translate_sdk_error`` (http_errors.py) read it, the README prints it (``markdown_table``),
and tests/providers/test_error_answers.py replays each row through the real SDKs.

HTTP answers are matched in order: the first row whose statuses hold the answer's and whose
hints (any of them, lowercased) are in its body. An error event inside a stream is matched
as the status its documented type is sent with before a stream (``ERROR_TYPE_STATUS``).
Rows without statuses are answers that are not HTTP statuses (no connection, a timeout, a
cut stream); the translation picks them by key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from providers.errors import ErrorCategory
from providers.outcomes import OUTCOME_LABELS, failure_class


@dataclass(frozen=True)
class ErrorAnswer:
    key: str
    answer: str  # what the provider sent, as the README prints it
    category: ErrorCategory
    statuses: tuple[int, ...] = ()
    hints: tuple[str, ...] = ()
    # A finer test of the lowercased body than hints, for what only numbers in it can tell.
    test: Callable[[str], bool] | None = None

    def fits(self, status: int, text: str) -> bool:
        if status not in self.statuses:
            return False
        if self.test is not None and self.test(text):
            return True
        return any(hint in text for hint in self.hints) if self.hints or self.test else True

    @property
    def outcome(self) -> str:
        return str(failure_class(self.category))


# OpenAI (and vLLM, and Azure): "This model's maximum context length is 8192 tokens. However,
# you requested 10000 tokens (2000 in the messages, 8000 in the completion)."
OPENAI_WINDOW = re.compile(r"maximum context length is (\d+) tokens.*?\((\d+) in the messages")
# Anthropic: "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000".
ANTHROPIC_WINDOW = re.compile(r"input length and .{0,3}max_tokens.{0,3} exceed context limit: (\d+) \+ \d+ > (\d+)")


def prompt_fits_without_the_output_limit(text: str) -> bool:
    """The window was passed only because of the arm's output limit: the prompt alone fits."""
    openai = OPENAI_WINDOW.search(text)
    if openai:
        return int(openai.group(2)) < int(openai.group(1))
    anthropic = ANTHROPIC_WINDOW.search(text)
    return anthropic is not None and int(anthropic.group(1)) < int(anthropic.group(2))


REFUSED = (400, 413, 422)
FILTER_HINTS = (
    *("content_filter", "content_policy", "responsible ai policy", "responsibleaipolicy", "safety system"),
    *("invalid_prompt", "usage policy"),
)
UNSUPPORTED_HINTS = (
    *("unsupported_parameter", "unsupported parameter", "unsupported_value", "unsupported value"),
    *("unrecognized request argument", "extra inputs are not permitted", "extra_forbidden"),
)
SERVER_STATUSES = tuple(range(500, 600))

ERROR_ANSWERS: tuple[ErrorAnswer, ...] = (
    ErrorAnswer(
        "output_limit_beyond_window",
        "HTTP 400: the output limit is beyond the model's (`max_tokens is too large`, Anthropic's "
        "`maximum allowed number of output tokens`), or the prompt fits the window and prompt + "
        "`max_tokens` does not",
        ErrorCategory.MAX_TOKENS_TOO_LARGE,
        REFUSED,
        ("max_tokens is too large", "max_completion_tokens is too large", "maximum allowed number of output tokens"),
        prompt_fits_without_the_output_limit,
    ),
    ErrorAnswer(
        "prompt_beyond_window",
        "HTTP 400 `context_length_exceeded`, `prompt is too long`: the prompt alone is beyond the window",
        ErrorCategory.CONTEXT_LENGTH_EXCEEDED,
        REFUSED,
        ("context_length_exceeded", "maximum context length", "prompt is too long", "too many tokens"),
    ),
    ErrorAnswer(
        "content_filtered",
        "HTTP 400 or 403 naming a content filter or policy (`content_filter`, Azure's "
        "`ResponsibleAIPolicyViolation`, OpenAI's `invalid_prompt`)",
        ErrorCategory.CONTENT_FILTERED,
        (*REFUSED, 403),
        FILTER_HINTS,
    ),
    ErrorAnswer(
        "request_too_large",
        "HTTP 413 (Anthropic's `request_too_large`): the task's prompt is more bytes than the endpoint takes",
        ErrorCategory.CONTEXT_LENGTH_EXCEEDED,
        (413,),
    ),
    ErrorAnswer(
        "unsupported_parameter",
        "HTTP 400 `unsupported_parameter` / `unsupported_value`, Azure's `Unrecognized request argument "
        "supplied` (an api-version before the parameter), Anthropic's `Extra inputs are not permitted`",
        ErrorCategory.UNSUPPORTED_PARAMETER,
        REFUSED,
        UNSUPPORTED_HINTS,
    ),
    ErrorAnswer(
        "bad_request",
        "any other HTTP 400 or 422 (`invalid_request_error`): the request as we built it",
        ErrorCategory.BAD_REQUEST,
        REFUSED,
    ),
    ErrorAnswer(
        "authentication", "HTTP 401 (`authentication_error`, `invalid_api_key`)", ErrorCategory.AUTHENTICATION, (401,)
    ),
    ErrorAnswer(
        "permission",
        "HTTP 402 or 403 (`billing_error`, `permission_error`): the key may not use it",
        ErrorCategory.PERMISSION,
        (402, 403),
    ),
    ErrorAnswer(
        "not_found",
        "HTTP 404 (`model_not_found`, `not_found_error`, Azure's `DeploymentNotFound`)",
        ErrorCategory.MODEL_NOT_FOUND,
        (404,),
    ),
    ErrorAnswer(
        "provider_timeout",
        "HTTP 408 or 504, or Anthropic's `timeout_error` (as a status or an `event: error` mid-stream)",
        ErrorCategory.PROVIDER_TIMEOUT,
        (408, 504),
    ),
    ErrorAnswer(
        "rate_limited", "HTTP 429 (`rate_limit_error`, `rate_limit_exceeded`)", ErrorCategory.RATE_LIMITED, (429,)
    ),
    ErrorAnswer(
        "overloaded",
        "HTTP 503 or 529, Anthropic's `overloaded_error` (as a status or mid-stream)",
        ErrorCategory.OVERLOADED,
        (503, 529),
    ),
    ErrorAnswer(
        "server_error",
        "any other HTTP 5xx (`api_error`, `server_error`), an error mid-stream that names no known type",
        ErrorCategory.SERVER_ERROR,
        SERVER_STATUSES,
    ),
    ErrorAnswer("other_status", "any other HTTP status", ErrorCategory.UNKNOWN),
    ErrorAnswer(
        "no_connection",
        "no connection: refused, a name that does not resolve, TLS refused",
        ErrorCategory.CONNECTION,
    ),
    ErrorAnswer(
        "connect_timeout",
        "no connection within the arm's connect timeout (or the request could not be sent in time): "
        "the request never reached the provider",
        ErrorCategory.CONNECTION,
    ),
    ErrorAnswer(
        "read_timeout",
        "the request was sent and the answer did not come within the arm's read timeout",
        ErrorCategory.TIMEOUT,
    ),
    ErrorAnswer(
        "total_timeout",
        "the answer was still streaming when the arm's total timeout ran out",
        ErrorCategory.TIMEOUT,
    ),
    ErrorAnswer(
        "stream_cut",
        "the connection closed before the answer was complete (no terminal event)",
        ErrorCategory.CONNECTION,
    ),
    ErrorAnswer("malformed", "HTTP 200 with a body that is not the documented answer", ErrorCategory.SERVER_ERROR),
    ErrorAnswer(
        "egress_refused",
        "nothing: the endpoint resolves to an address our egress policy refuses",
        ErrorCategory.EGRESS_REFUSED,
    ),
)

ANSWER_BY_KEY = {answer.key: answer for answer in ERROR_ANSWERS}
HTTP_ANSWERS = tuple(answer for answer in ERROR_ANSWERS if answer.statuses)


def answer_category(key: str) -> ErrorCategory:
    return ANSWER_BY_KEY[key].category


def answer_for_status(status: int, text: str) -> ErrorAnswer:
    """The row an HTTP error status and its (lowercased) body fall in."""
    return next((answer for answer in HTTP_ANSWERS if answer.fits(status, text)), ANSWER_BY_KEY["other_status"])


def markdown_table() -> str:
    """The table as the README prints it."""
    lines = ["| Provider answer | Category | Whose failure |", "| --- | --- | --- |"]
    for answer in ERROR_ANSWERS:
        lines.append(f"| {answer.answer} | `{answer.category}` | {OUTCOME_LABELS[answer.outcome]} |")
    return "\n".join(lines)
