"""One error taxonomy for every provider."""

from __future__ import annotations

from django.db import models


class ErrorCategory(models.TextChoices):
    AUTHENTICATION = "authentication"
    PERMISSION = "permission"
    MODEL_NOT_FOUND = "model_not_found"
    BAD_REQUEST = "bad_request"
    # The provider named a parameter of ours it does not take (or a value of it it refuses):
    # the arm's settings, its extra_body, or an api-version that predates the parameter.
    UNSUPPORTED_PARAMETER = "unsupported_parameter"
    # The arm's output limit (max_tokens) is beyond what the model allows, alone or with a
    # prompt that would fit without it: the arm's setting chose it, not the task.
    MAX_TOKENS_TOO_LARGE = "max_tokens_too_large"
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
    CONTENT_FILTERED = "content_filtered"
    RATE_LIMITED = "rate_limited"
    # The model had the request and did not finish its answer within the arm's read or
    # total timeout.
    TIMEOUT = "timeout"
    # The provider's side gave up on the request (HTTP 408 or 504, Anthropic's
    # "timeout_error"): its service, not the model's answer, ran out of time.
    PROVIDER_TIMEOUT = "provider_timeout"
    CONNECTION = "connection"
    SERVER_ERROR = "server_error"
    OVERLOADED = "overloaded"
    NOT_ALLOWED = "not_allowed"
    # The endpoint resolved to an address the platform's egress policy refuses (prbench/egress.py):
    # a platform set-up failure, never the model's; retrying cannot change the answer.
    EGRESS_REFUSED = "egress_refused"
    # The platform could not finish the attempt (the database refused its result, it crashed
    # outside the provider call, or it was handed out again and again without a result):
    # an infrastructure failure, never the model's, and never a reason to pay for it again.
    PLATFORM_ERROR = "platform_error"
    # The call would have passed the run's or the experiment's hard budget, so it was not
    # made (providers/budget.py): an infrastructure outcome, never the model's; retrying
    # cannot change the answer until someone raises the budget.
    BUDGET_EXCEEDED = "budget_exceeded"
    # The platform could not get the arm a concurrency slot or rate-limit token in time: the
    # wait was ours, not the provider's, so it is never the model's timeout.
    CAPACITY_TIMEOUT = "capacity_timeout"
    # A replayed system (another benchmark's predictions file, providers/adapters/replay/adapter.py)
    # gave no answer for the task: its file has no line for it. The system's failure, as
    # the harness counts an instance left out of a predictions file as not resolved.
    NO_ANSWER = "no_answer"
    # Not called: the arm's first calls in the run all failed with the same configuration
    # failure (experiments/misconfigured.py), so the rest of its attempts were not sent until
    # someone changes the arm's settings and resumes the run. Never scored, never paid.
    ARM_MISCONFIGURED = "arm_misconfigured"
    UNKNOWN = "unknown"


RETRYABLE = frozenset(
    {
        ErrorCategory.RATE_LIMITED,
        ErrorCategory.TIMEOUT,
        ErrorCategory.PROVIDER_TIMEOUT,
        ErrorCategory.CONNECTION,
        ErrorCategory.SERVER_ERROR,
        ErrorCategory.OVERLOADED,
    }
)


class ProviderError(Exception):
    """A provider call that did not produce a completion.

    ``message`` must never contain a credential: adapters build it from the status and
    the provider's error text only.
    """

    def __init__(self, category: ErrorCategory, message: str, *, retry_after: float | None = None):
        super().__init__(f"{category}: {message}")
        self.category = ErrorCategory(category)
        self.message = message
        self.retry_after = retry_after
        self.retries = 0
        self.retry_log: list[dict] = []  # one entry per failed try that was retried
        self.raw_request: dict = {}
        # The whole gateway call, every try and wait included; set by the gateway.
        self.wall_ms: int | None = None

    @property
    def retryable(self) -> bool:
        return self.category in RETRYABLE
