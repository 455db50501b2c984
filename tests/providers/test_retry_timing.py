"""How long the gateway waits before a retry, as the official SDKs decide it: the provider's
explicit retry-after first, a 429's reset header for the limit actually exhausted next, and
otherwise the SDKs' back-off (0.5 s doubling to 8 s, less up to 25 % jitter).

Real header combinations come from a local server speaking each provider's wire format;
the waits are read from the retry log the attempt stores. Numbers are small so that the
tests stay fast; the deadline is short so a wait that should not be honoured shows.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from orgs.models import Organization
from providers import gateway
from providers.adapters.http_errors import rate_limit_reset_seconds, retry_after_seconds
from providers.errors import ErrorCategory, ProviderError
from providers.models import ProviderCredential
from providers.types import ArmSpec, CompletionRequest, Message
from tests.providers.fake_server import Reply

REQUEST = CompletionRequest(messages=(Message("user", "hi"),), max_output_tokens=8)
# Short enough that a 6-minute reset header, if honoured, would end the call untried.
CONFIG = {"max_retries": 2, "retry_base_ms": 100, "retry_deadline_s": 3, "timeout_read_s": 5}

OPENAI_429 = {
    "error": {
        "message": "Rate limit reached for gpt-4.1 in organization org-x on tokens per min (TPM): "
        "Limit 30000, Used 30000, Requested 500. Please try again in 1s.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OPENAI_503 = {"error": {"message": "The engine is currently overloaded", "type": "server_error", "code": None}}
OPENAI_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4.1",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
ANTHROPIC_429 = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "This request would exceed the rate limit for your organization of 8,000 output tokens per minute.",
    },
}
ANTHROPIC_529 = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": "OK"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


def in_seconds(seconds: float) -> str:
    """An Anthropic reset header: an RFC 3339 time that far from now."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def anthropic_limits(**remaining_and_reset: tuple[int, float]) -> dict[str, str]:
    headers = {}
    for limit, (remaining, reset_s) in remaining_and_reset.items():
        name = limit.replace("_", "-")
        headers[f"anthropic-ratelimit-{name}-remaining"] = str(remaining)
        headers[f"anthropic-ratelimit-{name}-reset"] = in_seconds(reset_s)
    return headers


@pytest.fixture
def connect(fake, org):
    def make(provider: str) -> Organization:
        credential = ProviderCredential(
            org=org, provider=provider, base_url=fake.url + ("" if provider == "anthropic" else "/v1")
        )
        credential.set_api_key("sk-test-0123456789abcdef")
        credential.save()
        return org

    return make


def call(org, provider, **config):
    model = "claude-haiku-4-5" if provider == "anthropic" else "gpt-4.1"
    return gateway.complete(org.pk, ArmSpec(provider, model, CONFIG | config), REQUEST)


def warm(org, provider, fake) -> None:
    """One call first, so importing the SDK and building its client are not what is timed."""
    fake.script(Reply(200, ANTHROPIC_OK if provider == "anthropic" else OPENAI_OK))
    call(org, provider)
    fake.seen.clear()


def waits(completion_or_error) -> list[float]:
    return [entry["wait_s"] for entry in completion_or_error.retry_log]


# --- OpenAI ----------------------------------------------------------------------------------


def test_retry_after_wins_over_a_long_token_reset(connect, fake):
    """The issue's case: retry-after 2 beside reset-tokens 6m0s (scaled down). The OpenAI SDK
    waits for retry-after; taking the longest header meant no retry before the deadline."""
    org = connect("openai")
    headers = {
        "retry-after": "0.2",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
    }
    fake.script(Reply(429, OPENAI_429, headers), Reply(200, OPENAI_OK))
    completion = call(org, "openai")
    assert completion.text == "OK" and completion.retries == 1
    assert waits(completion) == [0.2]


def test_retry_after_ms_wins_over_retry_after(connect, fake):
    org = connect("openai")
    fake.script(Reply(429, OPENAI_429, {"retry-after-ms": "150", "retry-after": "60"}), Reply(200, OPENAI_OK))
    assert waits(call(org, "openai")) == [0.15]


def test_without_retry_after_the_exhausted_limits_reset_is_used(connect, fake):
    org = connect("openai")
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "250ms",
        "x-ratelimit-remaining-tokens": "29000",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    fake.script(Reply(429, OPENAI_429, headers), Reply(200, OPENAI_OK))
    assert waits(call(org, "openai")) == [0.25]


def test_when_no_limit_says_exhausted_the_soonest_reset_is_used(connect, fake):
    org = connect("openai")
    headers = {
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "300ms",
        "x-ratelimit-remaining-tokens": "12",
        "x-ratelimit-reset-tokens": "2s",
    }
    fake.script(Reply(429, OPENAI_429, headers), Reply(200, OPENAI_OK))
    assert waits(call(org, "openai")) == [0.3]


def test_a_503_backs_off_exponentially_whatever_the_reset_headers_say(connect, fake):
    org = connect("openai")
    headers = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}
    fake.script(Reply(503, OPENAI_503, headers), Reply(503, OPENAI_503, headers), Reply(200, OPENAI_OK))
    first, second = waits(call(org, "openai"))
    assert 0.075 <= first <= 0.1  # retry_base_ms 100, less up to 25 % jitter
    assert 0.15 <= second <= 0.2  # doubled


def test_a_wait_past_the_deadline_ends_the_call_at_once(connect, fake):
    """As the OpenAI SDK refuses a retry-after past its maximum, a wait that would end past the
    arm's deadline is not slept through: the attempt fails now, with the provider's category."""
    org = connect("openai")
    warm(org, "openai", fake)
    fake.script(Reply(429, OPENAI_429, {"retry-after": "30"}), Reply(200, OPENAI_OK))
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(org, "openai")
    assert caught.value.category == ErrorCategory.RATE_LIMITED
    assert caught.value.retries == 0 and len(fake.seen) == 1
    assert time.monotonic() - started < 2  # not the 3 s deadline, let alone 30 s


# --- Anthropic -------------------------------------------------------------------------------


def test_an_anthropic_529_backs_off_exponentially_not_until_the_resets(connect, fake):
    """The issue's case: a 529 waited 49.5 s because of the *-reset headers every answer carries."""
    org = connect("anthropic")
    headers = anthropic_limits(requests=(49, 49.5), tokens=(0, 49.5), output_tokens=(0, 49.5))
    fake.script(Reply(529, ANTHROPIC_529, headers), Reply(200, ANTHROPIC_OK))
    completion = call(org, "anthropic")
    assert completion.text == "OK" and completion.retries == 1
    assert 0.075 <= waits(completion)[0] <= 0.1


def test_an_anthropic_429_honours_its_retry_after(connect, fake):
    org = connect("anthropic")
    headers = {"retry-after": "0.2"} | anthropic_limits(output_tokens=(0, 40), requests=(10, 50))
    fake.script(Reply(429, ANTHROPIC_429, headers), Reply(200, ANTHROPIC_OK))
    assert waits(call(org, "anthropic")) == [0.2]


def test_an_anthropic_429_without_retry_after_waits_for_the_exhausted_limit(connect, fake):
    org = connect("anthropic")
    warm(org, "anthropic", fake)
    headers = anthropic_limits(output_tokens=(0, 1.0), requests=(10, 50), input_tokens=(9000, 30))
    fake.script(Reply(429, ANTHROPIC_429, headers), Reply(200, ANTHROPIC_OK))
    (wait,) = waits(call(org, "anthropic"))
    assert 0.5 < wait <= 1.0  # the output-tokens reset, less the time the answer took to read


# --- the header rules, one by one ------------------------------------------------------------

NOW = datetime(2026, 1, 1, tzinfo=UTC)

HEADER_CASES = [
    ({}, 429, None),
    ({"retry-after": "2"}, 429, 2.0),
    ({"retry-after": "2", "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}, 429, 2.0),
    ({"retry-after-ms": "1500", "retry-after": "9"}, 429, 1.5),
    ({"retry-after": "Thu, 01 Jan 2026 00:00:05 GMT"}, 429, 5.0),
    ({"retry-after": "0", "x-ratelimit-reset-requests": "1s"}, 429, 1.0),  # 0 is no request at all
    ({"retry-after": "2"}, 529, 2.0),  # explicit values hold for every status
    ({"retry-after": "soon"}, 503, None),
    ({"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}, 503, None),
    ({"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}, 429, 360.0),
    (
        {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1m30s",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "20ms",
        },
        429,
        90.0,  # both exhausted: the call needs both, so the later
    ),
    ({"x-ratelimit-reset-requests": "1.5s", "x-ratelimit-reset-tokens": "20ms"}, 429, 0.02),
    (
        {
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:07Z",
            "anthropic-ratelimit-requests-remaining": "40",
            "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01Z",
        },
        429,
        7.0,
    ),
    ({"anthropic-ratelimit-requests-reset": "2026-01-01T00:00:03Z"}, 529, None),
]


@pytest.mark.parametrize("headers, status, seconds", HEADER_CASES)
def test_retry_after_seconds(headers, status, seconds):
    assert retry_after_seconds(httpx.Headers(headers), status, now=NOW) == seconds


def test_a_reset_already_past_is_not_a_wait():
    headers = httpx.Headers(
        {"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2025-12-31T23:59:59Z"}
    )
    assert rate_limit_reset_seconds(headers, NOW) is None


def test_the_backoff_matches_the_sdks():
    for retry in range(1, 9):
        ceiling = min(0.5 * 2 ** (retry - 1), 8.0)
        samples = [gateway.backoff_seconds(retry, 0.5) for _ in range(200)]
        assert all(0.75 * ceiling <= s <= ceiling for s in samples)
        assert max(samples) - min(samples) > 0.05 * ceiling  # jittered, not fixed


# --- a call waiting to retry keeps its slot ---------------------------------------------------


def test_calls_waiting_to_retry_keep_their_slots_so_a_rate_limited_arm_holds_no_more_than_its_slots(connect, fake):
    """Six calls on an arm of two slots, each refused twice with a 429 before it is answered.
    A call that gave its slot back while it slept before a retry let another call of the arm
    start (on a thread of its own) and sleep beside it: the arm had more calls under way than
    slots. Seen from the provider, no more than two calls are ever between their first try and
    their answer."""
    org = connect("openai")
    tries: dict[str, list[float]] = {}

    def responder(seen):
        caller = seen.body["messages"][-1]["content"]
        tries.setdefault(caller, []).append(time.monotonic())
        if len(tries[caller]) <= 2:
            return Reply(429, OPENAI_429, {"retry-after": "0.05"})
        return Reply(200, OPENAI_OK)

    fake.responder = responder
    # Read here: the calls' threads do not see this test's transaction.
    prepared = gateway.prepare(org.pk, ArmSpec("openai", "gpt-4.1", CONFIG | {"max_concurrency": 2}, key="slots"))
    answered = []

    def one_call(number: int) -> None:
        request = CompletionRequest(messages=(Message("user", f"call {number}"),), max_output_tokens=8)
        answered.append(gateway.call(prepared, request).retries)

    threads = [threading.Thread(target=one_call, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answered == [2] * 6 and all(len(times) == 3 for times in tries.values())
    spans = [(times[0], times[-1]) for times in tries.values()]
    under_way = max(sum(1 for start, end in spans if start <= moment <= end) for moment, _ in spans)
    assert under_way == 2
