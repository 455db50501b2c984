"""The one entry point through which the rest of PRBench calls a model."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import lru_cache

from django.conf import settings
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables
from redis.exceptions import RedisError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from prbench import metrics, redaction
from prbench.crypto import DecryptionFailed
from providers import budget
from providers.adapters.base import Adapter
from providers.adapters.config import COST_REFUSAL, UnboundedCost, cost_fields, runtime_config
from providers.errors import ErrorCategory, ProviderError
from providers.limits import (
    DEFAULT_MAX_CONCURRENCY,
    CapacityTimeout,
    RateLimit,
    acquire_slots,
    charge_tokens,
    wait_for_rate_budget,
    wait_for_slot,
)
from providers.limits import release_slots as release_arm_slots
from providers.models import Price
from providers.policy import (
    CredentialChoiceError,
    ResolvedCredential,
    governance_version,
    governed_reason,
    resolve_credential,
)
from providers.pricing import catalog_price, ceiling_cost, price_cost
from providers.registry import adapter_class
from providers.types import USAGE_FIELDS, ArmSpec, Completion, CompletionRequest, ToolCall

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 2
DEFAULT_RETRY_BASE_MS = 500
DEFAULT_RETRY_DEADLINE_S = 120


def complete(org_id: int, arm: ArmSpec, request: CompletionRequest) -> Completion:
    """Run one request against one arm, retrying what the taxonomy says is retryable.

    Raises ``ProviderError`` (with ``retries`` set) when no completion could be had.
    ``org_id`` scopes credential look-up to the run's own organisation.
    """
    return call(prepare(org_id, arm), request)


@dataclass(frozen=True)
class PreparedArm:
    """An arm the organisation may call, with its credential, today's price and the hard
    budgets its calls count against (set by the caller: the pipeline, for a run's attempts).

    Holds no database connection: worker threads call providers with it while the job's
    own thread does all database work."""

    arm: ArmSpec
    adapter_class: type[Adapter]
    credential: ResolvedCredential | None = field(default=None, repr=False)
    price: Price | None = None
    budgets: tuple[budget.Budget, ...] = ()


def prepare(org_id: int, arm: ArmSpec) -> PreparedArm:
    """Governance for one arm: the allowlist and the org's own credential. Raises
    ``ProviderError`` before any network traffic when the org may not, or cannot, call it."""
    version = governance_version(org_id)
    adapter_class, credential = _governance(org_id, arm.provider, arm.model_name, arm.credential, version, _minute())
    _refuse_unpriced_body(adapter_class, arm.config)
    if credential is not None:
        redaction.remember_secret(credential.api_key)  # so this process's logs never show it
    # Only the settings the adapter declares, well-formed: a routing key (base_url, …) or
    # anything else written into an old row past the save-time checks never reaches it.
    arm = replace(arm, config=runtime_config(adapter_class.config_keys, arm.config))
    _warm(adapter_class(arm, credential))
    served = adapter_class.served_model(arm.model_name, credential.deployments if credential else {})
    return PreparedArm(arm, adapter_class, credential, arm_price(arm.provider, served, arm.config))


def _warm(adapter: Adapter) -> None:
    """The adapter's SDK client built now, in the preparing thread, not inside the first
    call's timing: a process's first call once measured 302 ms against a server answering in
    3 ms, and a pipeline's threads all starting cold at once measured 0.8 s each."""
    try:
        adapter.warm()
    except ProviderError:
        pass  # a credential the call cannot use: each call fails with it, as its attempt's error
    except Exception as exc:
        # Warming is an optimisation: an SDK that changed under it must not stop the arm's calls.
        logger.warning("could not warm the %s adapter: %s", adapter.arm.provider, type(exc).__name__)


def _refuse_unpriced_body(adapter_class: type[Adapter], config: dict) -> None:
    """An arm saved before ``extra_body`` was refused fields that change what a call can cost
    (``n``, a second token ceiling, tools …) makes no call at all. ``runtime_config`` would
    drop its whole extra_body and call a different arm under its name; this way its attempts
    fail as the platform's configuration error, never scored against the model, never paid."""
    body = config.get("extra_body")
    if "extra_body" not in adapter_class.config_keys or not isinstance(body, dict):
        return
    if priced := sorted(cost_fields(body)):
        raise ProviderError(
            ErrorCategory.PLATFORM_ERROR,
            f"config.extra_body may not set {', '.join(priced)} {COST_REFUSAL}; the arm was saved before "
            "that was refused, so none of its calls is made until its settings are changed",
        )


def arm_price(provider: str, model_name: str, config: dict) -> Price | None:
    """What the arm's calls cost per token today: the adapter's own figure where its settings
    give one (the mock's), else the price catalog's; None when neither knows. ``model_name``
    is the model served (``policy.served_model``): an Azure deployment is priced as its model."""
    configured = adapter_class(provider).configured_price(config)
    return configured or catalog_price(provider, model_name, timezone.now().date())


def hold_slots(prepared: PreparedArm, count: int) -> list[str]:
    """Take up to ``count`` of the arm's concurrency slots now, in one Redis round trip,
    for attempts about to be claimed (see ``call``'s ``held_slot``). A job takes its
    attempts' slots before it claims them, so an arm never has more attempts on a job's
    threads than it has slots: a hanging provider holds its own slots, not the threads
    other arms need. The caller gives them back with ``release_slots``, whatever became of
    the calls."""
    return acquire_slots(prepared.arm.key, _max_concurrency(prepared.arm), count)


def release_slots(prepared: PreparedArm, slots: list[str]) -> None:
    release_arm_slots(prepared.arm.key, slots)


# The provider may have billed a call cut off on the way back: its reservation stays spent.
MAYBE_BILLED = frozenset({ErrorCategory.TIMEOUT, ErrorCategory.PROVIDER_TIMEOUT, ErrorCategory.CONNECTION})


def call(prepared: PreparedArm, request: CompletionRequest, held_slot: str | None = None) -> Completion:
    """One request through the retry loop; safe to run on many threads at once.

    ``held_slot``, from ``hold_slots``, serves the call, so a batch of calls costs one Redis
    round trip for its slots instead of two per call; the caller gives it back. A call with
    none takes one at its first try and gives it back when it ends. Either way the slot is
    held from the first try to the last, the waits before retries included (``_CallSlot``).

    With budgets, the call's most possible cost is reserved against all of them first, and
    the call is not made (``BUDGET_EXCEEDED``) when that would pass one.
    """
    reservation = _reserve_budgets(prepared, request)
    if reservation is None:
        return _call(prepared, request, held_slot)
    try:
        completion = _call(prepared, request, held_slot)
    except ProviderError as exc:
        # Providers do not bill a refused call. A timed-out or cut one may have been billed
        # for all we know, so it keeps its reservation: overcounting is the safe error.
        if exc.category not in MAYBE_BILLED:
            budget.release(reservation)
        raise
    # An unknown cost keeps the reservation, the most it can have been.
    if completion.cost_usd is not None:
        budget.settle(reservation, completion.cost_usd)
    return completion


def _reserve_budgets(prepared: PreparedArm, request: CompletionRequest) -> budget.Reservation | None:
    """One reservation per call, not per try: a failed try is not billed, and the call
    has at most one answer. None when the arm has no budget to count against."""
    if not prepared.budgets:
        return None
    arm = prepared.arm
    if prepared.price is None:
        raise ProviderError(
            ErrorCategory.BUDGET_EXCEEDED,
            f"{arm.provider}/{arm.model_name} has no known price, so its calls cannot be held to a budget",
        )
    most = ceiling_cost(estimated_prompt_tokens(request), _billed_output_tokens(prepared, request), prepared.price)
    return budget.reserve(prepared.budgets, most)


def _billed_output_tokens(prepared: PreparedArm, request: CompletionRequest) -> int:
    """The output the adapter's request as sent can be billed for (every answer it asks for,
    each up to its token ceiling), not the arm's max_tokens: a setting that raises either is
    reserved for, or the call is not made."""
    adapter = prepared.adapter_class(prepared.arm, prepared.credential)
    try:
        return adapter.billed_output_tokens(request)
    except UnboundedCost as exc:
        raise ProviderError(
            ErrorCategory.PLATFORM_ERROR, f"{exc}, so what the call can cost has no bound and it was not made"
        ) from None


@sensitive_variables("secrets")  # Test connection runs this in a web request: no key on an error page
def _call(prepared: PreparedArm, request: CompletionRequest, held_slot: str | None) -> Completion:
    started = time.perf_counter()
    arm = prepared.arm
    adapter = prepared.adapter_class(arm, prepared.credential)  # per call: adapters keep per-attempt state
    secrets = _secrets(prepared.credential)
    retry_log: list[dict] = []
    clock = CallClock(_total_seconds(arm.config, prepared.adapter_class))
    slot = _CallSlot(held_slot)
    try:
        completion = _with_retries(arm.config, retry_log, secrets, clock, adapter, request, slot)
    except ProviderError as exc:
        exc.retries, exc.retry_log = len(retry_log), retry_log
        exc.wall_ms = _ms_since(started)
        _redact_error(exc, secrets)
        logger.info("provider call failed: provider=%s category=%s", arm.provider, exc.category)
        metrics.count_provider_failure(arm.provider, exc.category)
        raise
    finally:
        slot.release_own(arm.key)
    done = _redact_completion(
        completion, secrets, retries=len(retry_log), retry_log=tuple(retry_log), wall_ms=_ms_since(started)
    )
    # A provider-reported cost (OpenRouter, the mock) wins; counts the provider never sent price nothing.
    if done.cost_usd is None and prepared.price is not None and done.usage_reported:
        cost, breakdown = price_cost(done.usage, prepared.price)
        done = replace(done, cost_usd=cost, cost_breakdown=breakdown, cost_source="catalog")
    sane = sane_completion(done)
    if not sane.replayed:  # a replayed answer took no time of its own; figures as corrected
        metrics.observe_provider_call(arm.provider, sane.latency_ms, sane.first_token_ms)
    return sane


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


# Beyond these a figure is the server's mistake, not a measurement: no model reads or
# writes ten million tokens in one call, nor does a call take a day or cost $10,000.
MAX_TOKENS = 10_000_000
MAX_LATENCY_MS = 24 * 3600 * 1000
MAX_COST_USD = Decimal(10_000)


def sane_completion(completion: Completion) -> Completion:
    """The completion with every figure the provider got wrong (a negative, fractional or
    absurd token count, latency or cost: the OpenAI schema allows all of them) replaced by
    0, or an unknown cost, and a warning saying so, so no answer is unrecordable.

    A catalog cost computed from a bad count is as wrong as the count, so it is unknown too."""
    warnings: list[str] = []
    usage = {}
    for name in USAGE_FIELDS:  # not asdict(): a deep copy per attempt only to read six ints
        value = getattr(completion.usage, name)
        usage[name] = value if _sane_count(value, MAX_TOKENS) else 0
        if usage[name] is not value:
            warnings.append(f"usage.{name} {_shown(value)} is not a token count: stored as 0")
    counts_wrong = bool(warnings)
    latency_ms = completion.latency_ms if _sane_count(completion.latency_ms, MAX_LATENCY_MS) else 0
    if latency_ms is not completion.latency_ms:
        warnings.append(f"latency_ms {_shown(completion.latency_ms)} is not a duration: stored as 0")
    first_token_ms = completion.first_token_ms
    if first_token_ms is not None and not _sane_count(first_token_ms, MAX_LATENCY_MS):
        warnings.append(f"first_token_ms {_shown(first_token_ms)} is not a duration: stored as unknown")
        first_token_ms = None
    speed = completion.output_tokens_per_s
    if speed is not None and not _sane_speed(speed):
        warnings.append(f"output_tokens_per_s {_shown(speed)} is not a speed: stored as unknown")
        speed = None
    if counts_wrong or latency_ms is not completion.latency_ms or first_token_ms is not completion.first_token_ms:
        speed = None  # computed from a figure just found wrong
    cost, cost_source = completion.cost_usd, completion.cost_source
    if cost is not None and not (isinstance(cost, Decimal) and cost.is_finite() and 0 <= cost <= MAX_COST_USD):
        warnings.append(f"cost_usd {_shown(cost)} is not a price: stored as unknown")
        cost, cost_source = None, ""
    elif cost is not None and cost_source == "catalog" and counts_wrong:
        warnings.append("the catalog cost would come from a corrected count: stored as unknown")
        cost, cost_source = None, ""
    if not warnings:
        return completion
    logger.warning("provider figures corrected: %s", "; ".join(warnings))
    return replace(
        completion,
        usage=replace(completion.usage, **usage),
        latency_ms=latency_ms,
        first_token_ms=first_token_ms,
        output_tokens_per_s=speed,
        cost_usd=cost,
        cost_breakdown=completion.cost_breakdown if cost is not None else {},
        cost_source=cost_source,
        warnings=(*completion.warnings, *warnings),
    )


def _shown(value: object) -> str:
    return repr(value)[:40]  # whatever the server sent, a bounded mention of it


def _sane_speed(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value) and 0 <= value <= MAX_TOKENS


def _sane_count(value: object, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def _secrets(credential: ResolvedCredential | None) -> tuple[str, ...]:
    return (credential.api_key,) if credential is not None and credential.api_key else ()


def _redact_error(error: ProviderError, secrets: tuple[str, ...]) -> None:
    """In place, as it is re-raised: a provider may quote the key in its error text (OpenAI's
    "Incorrect API key provided: sk-…"), and every caller stores or shows what it gets."""
    error.message = redaction.redact_text(error.message, secrets)
    error.args = (f"{error.category}: {error.message}",)  # str(error), as the evaluator stores it
    error.retry_log = redaction.redact_data(error.retry_log, secrets)
    error.raw_request = redaction.redact_data(error.raw_request, secrets)
    # The SDK's own exception (its message and response quote the provider's body) must not
    # be reachable from ours, nor printed by a traceback.
    error.__cause__ = error.__context__ = None


def _redact_completion(
    completion: Completion, secrets: tuple[str, ...], *, retries: int, retry_log: tuple[dict, ...], wall_ms: int
) -> Completion:
    """The answer loses only the credential's key (it may quote lookalikes); everything the
    provider chose (ids, model name, raw bodies) loses key-shaped tokens too. With the call's
    own figures set in the same copy: each replace() of a completion copies every field, and
    this runs once per attempt (issue 31)."""
    return replace(
        completion,
        retries=retries,
        wall_ms=wall_ms,
        text=redaction.redact_answer(completion.text, secrets),
        tool_calls=tuple(_redact_tool_call(call, secrets) for call in completion.tool_calls),
        finish_reason=redaction.redact_text(completion.finish_reason, secrets),
        model_served=redaction.redact_text(completion.model_served, secrets),
        request_id=redaction.redact_text(completion.request_id, secrets),
        retry_log=redaction.redact_data(retry_log, secrets),
        raw_request=redaction.redact_data(completion.raw_request, secrets),
        raw_response=redaction.redact_data(completion.raw_response, secrets),
    )


def _redact_tool_call(call: ToolCall, secrets: tuple[str, ...]) -> ToolCall:
    """A tool call is the model's answer too (a file it writes may quote a lookalike key): its
    arguments and malformed text lose only the credential's key; the provider's id loses
    key-shaped tokens as well."""
    return replace(
        call,
        id=redaction.redact_text(call.id, secrets),
        name=redaction.redact_answer(call.name, secrets),
        arguments=redaction.redact_answer_data(call.arguments, secrets),
        malformed=redaction.redact_answer(call.malformed, secrets),
    )


GOVERNANCE_MAX_AGE_S = 60


def _minute() -> int:
    return int(time.time() // GOVERNANCE_MAX_AGE_S)


@lru_cache(maxsize=256)
def _governance(
    org_id: int, provider: str, model_name: str, credential_name: str, version: str, minute: int
) -> tuple[type[Adapter], ResolvedCredential | None]:
    """Cached per governance version (see ``governance_version``): two queries per org,
    provider and model until an admin changes the allowlist or a credential, not per call.
    Never older than a minute either, in case a change could not reach Redis. A refusal is
    not cached (``lru_cache`` keeps no exceptions), so it is re-checked."""
    reason = governed_reason(org_id, provider, model_name)
    if reason:
        raise ProviderError(ErrorCategory.NOT_ALLOWED, reason)
    cls = adapter_class(provider)
    if not cls.uses_credential:
        return cls, None
    try:
        credential = resolve_credential(org_id, provider, credential_name)
    except DecryptionFailed:
        raise ProviderError(ErrorCategory.AUTHENTICATION, "the stored API key cannot be decrypted") from None
    except CredentialChoiceError as exc:
        raise ProviderError(ErrorCategory.AUTHENTICATION, str(exc)) from None
    if cls.needs_credential and credential is None:
        raise ProviderError(ErrorCategory.AUTHENTICATION, f"the organisation has no {provider} credential")
    return cls, credential


class CallClock:
    """When a call must be over: ``timeout_total_s`` (or the retry deadline) of the provider's
    own time. Time spent waiting for the platform's capacity (an arm's slot, the credential's
    rate budget) moves the end back by as much: that wait is ours, never the provider's, and
    must not turn into the model's timeout."""

    def __init__(self, total_s: float):
        self.deadline = time.monotonic() + total_s

    @contextlib.contextmanager
    def waiting_for_capacity(self) -> Iterator[float]:
        """Wait, for at most ``PRBENCH_CAPACITY_WAIT_SECONDS`` (the deadline it yields, on
        ``time.monotonic()``), off the call's clock."""
        started = time.monotonic()
        try:
            yield started + settings.PRBENCH_CAPACITY_WAIT_SECONDS
        finally:
            self.deadline += time.monotonic() - started


class _CallSlot:
    """The arm slot one call holds, from its first try to its last.

    A try that fails keeps the slot through the wait before the retry: a call sleeping on a
    429's retry-after is still the arm's call, and had it given its slot back, a new attempt
    of the arm would take it (and a thread), fail the same way and sleep beside it. An arm
    that rate-limits or fails then holds at most its ``max_concurrency`` threads, and the
    other arms keep theirs."""

    def __init__(self, held: str | None):
        self.token = held
        self.own: list[str] = []  # taken by this call, not handed in: given back by it

    def take(self, adapter: Adapter, clock: CallClock) -> None:
        key = adapter.arm.key
        if self.token or not key:
            return
        try:
            with clock.waiting_for_capacity() as capacity_deadline:
                self.own = wait_for_slot(key, _max_concurrency(adapter.arm), capacity_deadline)
        except CapacityTimeout:
            raise _capacity_timeout("a free slot of the arm (max_concurrency)") from None
        self.token = self.own[0]

    def release_own(self, key: str) -> None:
        release_arm_slots(key, self.own)  # never raises: an answer must not be lost to Redis
        self.own = []


def _generate_within_limits(
    adapter: Adapter, request: CompletionRequest, clock: CallClock, slot: _CallSlot
) -> Completion:
    """One try: rate budget first, then the arm's slot if the call holds none yet, so a call
    held back by its credential's rate limit does not also keep another call of the arm from
    running. A call that already holds its slot (handed in, or kept from a failed try) waits
    for rate budget in it, as that attempt's thread would otherwise wait for a slot."""
    limit = _rate_limit(adapter.credential)
    estimate = estimated_tokens(request) if limit else 0
    if limit is not None:
        _take_rate_budget(adapter, limit, estimate, clock)
    slot.take(adapter, clock)
    completion = _generate(adapter, request, clock)
    used = completion.usage.input_tokens + completion.usage.output_tokens
    if limit is not None and used > estimate:
        # The answer is paid for: a Redis error here must not lose it (the bucket refills).
        try:
            charge_tokens(limit, used - estimate, time.time())
        except RedisError as exc:
            logger.warning("could not charge %s tokens to the rate limit: %s", used - estimate, type(exc).__name__)
    return completion


def estimated_tokens(request: CompletionRequest) -> int:
    """What a request is admitted for against tokens per minute, before anyone counts it.

    OpenAI admits a request by its prompt at about four characters a token plus max_tokens,
    and Anthropic likewise reserves max_tokens up front and settles the actual count after
    the response; we estimate the same way and charge any excess once usage is known.
    """
    return estimated_prompt_tokens(request) + request.max_output_tokens


def estimated_prompt_tokens(request: CompletionRequest) -> int:
    """The prompt's tokens before anyone counts them, at about four characters a token: the
    one rule for rate limits, budget reservations and the pre-run estimate. An agent's turn
    is also billed for its tools' schemas and the earlier turns' tool calls, which are sent
    as JSON beside the text."""
    return math.ceil((len(request.prompt_text()) + len(_tool_text(request))) / 4)


def _tool_text(request: CompletionRequest) -> str:
    tools = [[tool.name, tool.description, tool.parameters] for tool in request.tools]
    calls = [
        [call.id, call.name, call.malformed or call.arguments]
        for message in request.messages
        for call in message.tool_calls
    ]
    if not (tools or calls):
        return ""
    return json.dumps([tools, calls], ensure_ascii=False)


def _rate_limit(credential: ResolvedCredential | None) -> RateLimit | None:
    if credential is None or credential.id is None:
        return None
    if not (credential.requests_per_minute or credential.tokens_per_minute):
        return None
    return RateLimit(credential.id, credential.requests_per_minute, credential.tokens_per_minute)


def _take_rate_budget(adapter: Adapter, limit: RateLimit, tokens: int, clock: CallClock) -> None:
    if limit.tokens_per_minute and tokens > limit.tokens_per_minute:
        raise ProviderError(
            ErrorCategory.BAD_REQUEST,
            f"the request is estimated at {tokens} tokens (prompt plus max_output_tokens), more than "
            f"the credential's whole tokens_per_minute limit of {limit.tokens_per_minute}",
        )
    with clock.waiting_for_capacity() as capacity_deadline:
        taken = wait_for_rate_budget(limit, tokens, adapter.arm.key, capacity_deadline)
    if not taken:
        raise _capacity_timeout("the credential's rate limit")


def _capacity_timeout(what: str) -> ProviderError:
    # Not retryable, and an infrastructure outcome: the platform had no room, the model no turn.
    return ProviderError(
        ErrorCategory.CAPACITY_TIMEOUT,
        f"waited {settings.PRBENCH_CAPACITY_WAIT_SECONDS} s for {what} without getting it; no call was made",
    )


def _max_concurrency(arm: ArmSpec) -> int:
    return arm.config.get("max_concurrency", DEFAULT_MAX_CONCURRENCY)


def _generate(adapter: Adapter, request: CompletionRequest, clock: CallClock) -> Completion:
    adapter.deadline = clock.deadline  # as moved back by any wait for capacity
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


def _total_seconds(config: dict, adapter_class: type[Adapter]) -> float:
    """How long a whole call may take, every try and wait included: the adapter's own word
    (``call_seconds``), else ``timeout_total_s`` when the arm sets it, never more than
    ``retry_deadline_s``."""
    own = adapter_class.call_seconds(config)
    if own is not None:
        return own
    deadline = config.get("retry_deadline_s", DEFAULT_RETRY_DEADLINE_S)
    return min(deadline, config.get("timeout_total_s", deadline))


# The official openai and anthropic SDKs' back-off: 0.5 s doubling per retry up to 8 s,
# less up to 25 % jitter (INITIAL_RETRY_DELAY, MAX_RETRY_DELAY in their _constants.py).
MAX_BACKOFF_S = 8.0
BACKOFF_JITTER = 0.25


def backoff_seconds(retry_number: int, base_s: float) -> float:
    """The wait before retry ``retry_number`` (1 for the first) when the provider named none."""
    return min(base_s * 2.0 ** min(retry_number - 1, 1000), MAX_BACKOFF_S) * (1 - BACKOFF_JITTER * random.random())


class _PastTheDeadline(stop_base):
    """Stops not after the delay but before it: no retry whose wait would end past the call's
    deadline (which waits for capacity move back)."""

    def __init__(self, clock: CallClock):
        self.clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + (retry_state.upcoming_sleep or 0) > self.clock.deadline


def _with_retries(
    config: dict,
    retry_log: list[dict],
    secrets: tuple[str, ...],
    clock: CallClock,
    adapter: Adapter,
    request: CompletionRequest,
    slot: _CallSlot,
) -> Completion:
    """The call's tries under the arm's retry policy. The first try is made before the policy
    is built: most calls are answered at once, and building and driving tenacity's loop cost
    more than a local model's whole answer (issue 31). A retryable failure then starts the
    loop as its first try, handed in rather than made again, so the tries, their waits and
    their log are the policy's own."""
    try:
        return _generate_within_limits(adapter, request, clock, slot)
    except ProviderError as exc:
        if not exc.retryable:
            raise
        first_failure: list[ProviderError] = [exc]

    def tries() -> Completion:
        if first_failure:
            raise first_failure.pop()
        return _generate_within_limits(adapter, request, clock, slot)

    return _retry_policy(config, retry_log, secrets, clock)(tries)


def _retry_policy(config: dict, retry_log: list[dict], secrets: tuple[str, ...], clock: CallClock) -> Retrying:
    base_s = config.get("retry_base_ms", DEFAULT_RETRY_BASE_MS) / 1000

    def wait(state: RetryCallState) -> float:
        # The provider's own word when it gave one (providers/adapters/http_errors.py), as
        # the SDKs do; a wait past the deadline is not shortened but ends the call
        # (past_the_deadline), since an early retry would only be refused again.
        error = state.outcome.exception() if state.outcome else None
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None and retry_after > 0:
            return retry_after
        return backoff_seconds(state.attempt_number, base_s)

    def record(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        retry_log.append(
            {
                "try": state.attempt_number,
                "category": str(getattr(error, "category", "unknown")),
                # Redacted before it is cut: a cut could leave a key's prefix unrecognisable.
                "message": redaction.redact_text(getattr(error, "message", ""), secrets)[:200],
                "wait_s": round(state.next_action.sleep if state.next_action else 0.0, 3),
            }
        )

    return Retrying(
        before_sleep=record,
        stop=stop_after_attempt(1 + config.get("max_retries", DEFAULT_MAX_RETRIES)) | _PastTheDeadline(clock),
        wait=wait,
        retry=retry_if_exception(lambda exc: isinstance(exc, ProviderError) and exc.retryable),
        reraise=True,
    )
