"""Whose fault a failure is: the model's, the infrastructure's, or the arm's configuration.
The one place that says so.

A model failure counts against the arm (it is part of what the benchmark measures); an
infrastructure failure says nothing about the model, so it is shown apart and left out of
every rate that scores the model. A configuration failure is a request the provider refused
because of what we sent or the arm's own settings: neither the model's doing nor an outage,
it is shown in a column of its own and never in a quality figure. What each provider answer
is, category by category, is the table in providers/adapters/error_answers.py. The recorder
stores each attempt's class on it (``Attempt.outcome``), through ``outcome_class``; boards
and exports read that column.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from providers.errors import ErrorCategory

# The answer (or the refusal to give one) came from the model, or the task did not fit it.
MODEL_FAILURES = frozenset(
    {
        # The model had the request and did not finish inside the arm's deadline; a connect
        # timeout, the provider's own 408/504 and waiting for capacity are not counted.
        ErrorCategory.TIMEOUT,
        ErrorCategory.CONTENT_FILTERED,  # the provider's filter refused the model's output or the task
        # The task's prompt does not fit the model's window (with the arm's output limit only
        # when the prompt alone does not fit: else MAX_TOKENS_TOO_LARGE, the arm's setting).
        ErrorCategory.CONTEXT_LENGTH_EXCEEDED,
        ErrorCategory.NO_ANSWER,  # a replayed system's predictions have nothing for the task
    }
)

# The provider refused our request or the arm's settings: neither the model's doing nor an
# outage; it ends the same way on every task until someone changes the arm.
CONFIGURATION_FAILURES = frozenset(
    {
        ErrorCategory.BAD_REQUEST,  # the provider refused the request as we built it
        ErrorCategory.UNSUPPORTED_PARAMETER,  # a parameter (or api-version) the model or endpoint does not take
        ErrorCategory.MAX_TOKENS_TOO_LARGE,  # the arm's output limit is beyond the model's window
        ErrorCategory.MODEL_NOT_FOUND,  # the arm names a model or deployment the endpoint does not serve
        ErrorCategory.ARM_MISCONFIGURED,  # not called: the arm's first calls all failed one of the ways above
    }
)

# The platform, the account or the provider's service failed; the model never had its turn.
INFRASTRUCTURE_FAILURES = frozenset(
    {
        ErrorCategory.AUTHENTICATION,  # the org's key was refused or missing
        ErrorCategory.PERMISSION,  # the key may not use this model
        ErrorCategory.NOT_ALLOWED,  # the org's allowlist refused the arm
        ErrorCategory.RATE_LIMITED,  # the account's quota, not the model's ability
        ErrorCategory.CONNECTION,  # the network between us and the provider, a connect timeout included
        ErrorCategory.PROVIDER_TIMEOUT,  # the provider's service gave up (408, 504, "timeout_error")
        ErrorCategory.SERVER_ERROR,  # the provider's service failed
        ErrorCategory.OVERLOADED,  # the provider had no capacity
        ErrorCategory.EGRESS_REFUSED,  # our egress policy refused the endpoint
        ErrorCategory.PLATFORM_ERROR,  # PRBench itself failed (a crash, a refused row, a poison attempt)
        ErrorCategory.CAPACITY_TIMEOUT,  # PRBench could not get the arm a slot in time
        ErrorCategory.BUDGET_EXCEEDED,  # a spending cap the org set stopped the call before it was made
        ErrorCategory.UNKNOWN,  # nothing shows it was the model's doing, so it is not scored as such
    }
)


class OutcomeClass(models.TextChoices):
    """An attempt's class, stored on it (``Attempt.outcome``) when it is recorded."""

    SUCCESS = "model_success", "model success"  # the model answered (resolving the task or not)
    MODEL_FAILURE = "model_failure", "model failure"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure", "infrastructure failure"
    CONFIGURATION_FAILURE = "configuration_failure", "configuration failure"


# The classes quality statistics count: what the model did, well or badly.
SCORED = (OutcomeClass.SUCCESS, OutcomeClass.MODEL_FAILURE)


def is_infrastructure_failure(category: str) -> bool:
    return category in INFRASTRUCTURE_FAILURES


def failure_class(error_category: str) -> str:
    """The class of an attempt that failed with this category."""
    if error_category in MODEL_FAILURES:
        return OutcomeClass.MODEL_FAILURE
    if error_category in CONFIGURATION_FAILURES:
        return OutcomeClass.CONFIGURATION_FAILURE
    return OutcomeClass.INFRASTRUCTURE_FAILURE


def outcome_class(status: str, error_category: str = "", harness_failed: bool = False) -> str:
    """The class of a finished attempt (``status`` completed or failed), else "" (queued,
    running, cancelled). ``harness_failed``: the answer came, but the validation harness gave
    no verdict on it (the tests ran out of time): that says nothing about the model either."""
    if status == "completed":
        return OutcomeClass.INFRASTRUCTURE_FAILURE if harness_failed else OutcomeClass.SUCCESS
    if status != "failed":
        return ""
    return failure_class(error_category)


OUTCOME_LABELS = dict(OutcomeClass.choices)


def outcome_q(outcome: str) -> Q:
    """The attempts of one outcome class, as a filter on the class stored on each attempt."""
    if outcome not in OUTCOME_LABELS:
        raise ValueError(f"no outcome class {outcome!r}")
    return Q(outcome=outcome)


# The attempt statuses each class can have: a list reads one status at a time, so it must
# know where a class's attempts are. An answer the harness gave no verdict on is completed
# and yet the infrastructure's failure.
OUTCOME_STATUSES: dict[str, tuple[str, ...]] = {
    OutcomeClass.SUCCESS: ("completed",),
    OutcomeClass.MODEL_FAILURE: ("failed",),
    OutcomeClass.INFRASTRUCTURE_FAILURE: ("completed", "failed"),
    OutcomeClass.CONFIGURATION_FAILURE: ("failed",),
}
