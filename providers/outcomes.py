"""Which failures are the model's and which are the platform's: the one place that says so.

A model failure counts against the arm (it is part of what the benchmark measures); an
infrastructure failure says nothing about the model, so it is shown apart and left out of
every rate that scores the model.
"""

from __future__ import annotations

from django.db.models import Case, CharField, Q, Value, When

from providers.errors import ErrorCategory

# The answer (or the refusal to give one) came from the model or the request it was sent.
MODEL_FAILURES = frozenset(
    {
        ErrorCategory.TIMEOUT,  # the model took longer than the arm allows; waiting for capacity is not counted
        ErrorCategory.CONTENT_FILTERED,  # the provider's filter refused the model's output or the task
        ErrorCategory.CONTEXT_LENGTH_EXCEEDED,  # the task does not fit the model's context window
        ErrorCategory.BAD_REQUEST,  # the model refused the request as sent (its parameters, its tools)
    }
)

# The platform, the account or the provider's service failed; the model never had its turn.
INFRASTRUCTURE_FAILURES = frozenset(
    {
        ErrorCategory.AUTHENTICATION,  # the org's key was refused or missing
        ErrorCategory.PERMISSION,  # the key may not use this model
        ErrorCategory.NOT_ALLOWED,  # the org's allowlist refused the arm
        ErrorCategory.MODEL_NOT_FOUND,  # the arm names a model the endpoint does not serve
        ErrorCategory.RATE_LIMITED,  # the account's quota, not the model's ability
        ErrorCategory.CONNECTION,  # the network between us and the provider
        ErrorCategory.SERVER_ERROR,  # the provider's service failed
        ErrorCategory.OVERLOADED,  # the provider had no capacity
        ErrorCategory.EGRESS_REFUSED,  # our egress policy refused the endpoint
        ErrorCategory.PLATFORM_ERROR,  # PRBench itself failed (a crash, a refused row, a poison attempt)
        ErrorCategory.CAPACITY_TIMEOUT,  # PRBench could not get the arm a slot in time
        ErrorCategory.BUDGET_EXCEEDED,  # a spending cap the org set stopped the call before it was made
        ErrorCategory.UNKNOWN,  # nothing shows it was the model's doing, so it is not scored as such
    }
)


class OutcomeClass:
    """An attempt's class, as the function and the SQL expression below name it."""

    SUCCESS = "model_success"  # the model answered (whether the answer resolves the task or not)
    MODEL_FAILURE = "model_failure"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure"


def is_infrastructure_failure(category: str) -> bool:
    return category in INFRASTRUCTURE_FAILURES


def outcome_class(status: str, error_category: str) -> str | None:
    """The class of a finished attempt (``status`` completed or failed), else None."""
    if status == "completed":
        return OutcomeClass.SUCCESS
    if status != "failed":
        return None
    if error_category in MODEL_FAILURES:
        return OutcomeClass.MODEL_FAILURE
    return OutcomeClass.INFRASTRUCTURE_FAILURE


# Filters over an attempt's own fields, for Count(filter=…) and the like.
MODEL_FAILED = Q(status="failed", error_category__in=sorted(MODEL_FAILURES))
INFRASTRUCTURE_FAILED = Q(status="failed") & ~Q(error_category__in=sorted(MODEL_FAILURES))


OUTCOME_LABELS = {
    OutcomeClass.SUCCESS: "model success",
    OutcomeClass.MODEL_FAILURE: "model failure",
    OutcomeClass.INFRASTRUCTURE_FAILURE: "infrastructure failure",
}


def outcome_q(outcome: str) -> Q:
    """The attempts of one outcome class, as a filter: the same split as ``outcome_class``.
    Lists filter through this alone, so storing the class on the attempt changes only here."""
    filters = {
        OutcomeClass.SUCCESS: Q(status="completed"),
        OutcomeClass.MODEL_FAILURE: MODEL_FAILED,
        OutcomeClass.INFRASTRUCTURE_FAILURE: INFRASTRUCTURE_FAILED,
    }
    if outcome not in filters:
        raise ValueError(f"no outcome class {outcome!r}")
    return filters[outcome]


# The attempt statuses each class can have: a list reads one status at a time, so it must
# know where a class's attempts are. Keep it beside outcome_q, which it must cover.
OUTCOME_STATUSES = {
    OutcomeClass.SUCCESS: ("completed",),
    OutcomeClass.MODEL_FAILURE: ("failed",),
    OutcomeClass.INFRASTRUCTURE_FAILURE: ("failed",),
}


def outcome_class_sql() -> Case:
    """``outcome_class`` in SQL, usable in annotate(): the same split, decided in one place."""
    return Case(
        When(status="completed", then=Value(OutcomeClass.SUCCESS)),
        When(MODEL_FAILED, then=Value(OutcomeClass.MODEL_FAILURE)),
        When(status="failed", then=Value(OutcomeClass.INFRASTRUCTURE_FAILURE)),
        default=None,
        output_field=CharField(),
    )
