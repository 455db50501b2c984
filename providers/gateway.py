"""The one entry point through which the rest of PRBench calls a model."""

from __future__ import annotations

import logging
from dataclasses import replace

from django.utils import timezone
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_random_exponential

from providers.adapters.base import Adapter
from providers.crypto import DecryptionFailed
from providers.errors import ErrorCategory, ProviderError
from providers.limits import DEFAULT_MAX_CONCURRENCY, arm_slot
from providers.policy import not_allowed_reason, resolve_credential
from providers.pricing import catalog_cost
from providers.registry import adapter_class
from providers.types import ArmSpec, Completion, CompletionRequest

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 2
DEFAULT_RETRY_BASE_MS = 500
DEFAULT_RETRY_DEADLINE_S = 120


def complete(org_id: int, arm: ArmSpec, request: CompletionRequest) -> Completion:
    """Run one request against one arm, retrying what the taxonomy says is retryable.

    Raises ``ProviderError`` (with ``retries`` set) when no completion could be had.
    ``org_id`` scopes credential look-up to the run's own organisation.
    """
    adapter = _governed_adapter(org_id, arm)
    retry_log: list[dict] = []
    retrying = _retry_policy(arm.config, retry_log)
    try:
        completion = retrying(_generate_in_slot, adapter, request)
    except ProviderError as exc:
        exc.retries, exc.retry_log = len(retry_log), retry_log
        logger.info("provider call failed: provider=%s category=%s", arm.provider, exc.category)
        raise
    done = replace(completion, retries=len(retry_log), retry_log=tuple(retry_log))
    if done.cost_usd is None:  # a provider-reported cost (OpenRouter, the mock) wins
        cost = catalog_cost(arm.provider, arm.model_name, done.usage, timezone.now().date())
        return replace(done, cost_usd=cost, cost_source="catalog" if cost is not None else "")
    return done


def _governed_adapter(org_id: int, arm: ArmSpec) -> Adapter:
    """The adapter for this arm, after the allowlist and with the org's own credential.
    Raises before any network traffic when the org may not, or cannot, call the provider."""
    reason = not_allowed_reason(org_id, arm.provider, arm.model_name)
    if reason:
        raise ProviderError(ErrorCategory.NOT_ALLOWED, reason)
    cls = adapter_class(arm.provider)
    if not cls.uses_credential:
        return cls(arm)
    try:
        credential = resolve_credential(org_id, arm.provider)
    except DecryptionFailed:
        raise ProviderError(ErrorCategory.AUTHENTICATION, "the stored API key cannot be decrypted") from None
    if cls.needs_credential and credential is None:
        raise ProviderError(ErrorCategory.AUTHENTICATION, f"the organisation has no {arm.provider} credential")
    return cls(arm, credential)


def _generate_in_slot(adapter: Adapter, request: CompletionRequest) -> Completion:
    # A slot per try, not per attempt: an attempt sleeping before a retry holds none.
    limit = adapter.arm.config.get("max_concurrency", DEFAULT_MAX_CONCURRENCY)
    with arm_slot(adapter.arm.key, limit):
        return _generate(adapter, request)


def _generate(adapter: Adapter, request: CompletionRequest) -> Completion:
    try:
        return adapter.generate(request)
    except ProviderError:
        raise
    except Exception as exc:
        # An adapter bug or an SDK error nobody mapped yet is still a scored failure of this
        # attempt, not a crashed job. Only the type is kept: messages can quote credentials.
        # No traceback: its message and locals could quote the credential.
        logger.error("unmapped provider exception: provider=%s type=%s", adapter.arm.provider, type(exc).__name__)
        raise ProviderError(
            ErrorCategory.UNKNOWN, f"unexpected {type(exc).__name__} from the provider adapter"
        ) from None


def _retry_policy(config: dict, retry_log: list[dict]) -> Retrying:
    base_s = config.get("retry_base_ms", DEFAULT_RETRY_BASE_MS) / 1000
    exponential = wait_random_exponential(multiplier=base_s, max=60)

    def wait(state: RetryCallState) -> float:
        # Full jitter, but never sooner than the provider asked us to come back.
        error = state.outcome.exception() if state.outcome else None
        retry_after = getattr(error, "retry_after", None) or 0
        return max(retry_after, exponential(state))

    def record(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        retry_log.append(
            {
                "try": state.attempt_number,
                "category": str(getattr(error, "category", "unknown")),
                "message": getattr(error, "message", "")[:200],
                "wait_s": round(state.next_action.sleep if state.next_action else 0.0, 3),
            }
        )

    return Retrying(
        before_sleep=record,
        stop=stop_after_attempt(1 + config.get("max_retries", DEFAULT_MAX_RETRIES))
        | stop_after_delay(config.get("retry_deadline_s", DEFAULT_RETRY_DEADLINE_S)),
        wait=wait,
        retry=retry_if_exception(lambda exc: isinstance(exc, ProviderError) and exc.retryable),
        reraise=True,
    )
