"""Every real adapter, run through the gateway with its real SDK against a local server
that speaks the provider's wire format."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest

from orgs.models import Organization
from providers.errors import ErrorCategory, ProviderError
from providers.models import AllowedProvider
from tests.providers.contracts import KEY, call
from tests.providers.fake_server import Reply


def test_success_is_normalised(wire, fake):
    spec, org = wire
    fake.script(Reply(200, spec.success, {"x-request-id": "req-77", "request-id": "req-77"}))
    completion = call(org, spec)
    assert completion.text == "diff --git a/x b/x"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 7)
    assert completion.model_served == "served-model"
    assert completion.request_id == "req-77"
    assert completion.retries == 0 and completion.latency_ms >= 0
    seen = fake.seen[-1]
    assert seen.path.split("?")[0] == spec.path
    sent_key = (
        seen.headers.get("authorization", "") + seen.headers.get("api-key", "") + seen.headers.get("x-api-key", "")
    )
    assert KEY in sent_key
    assert "RECORDED-ANSWER-NEVER-SENT" not in json.dumps(seen.body)
    # OpenAI and Azure refuse max_tokens for their current models (tests/providers/test_request_params.py).
    assert seen.body[spec.token_limit_field] == 64 and seen.body["temperature"] == 0.0
    assert not ({"max_tokens", "max_completion_tokens"} - {spec.token_limit_field}) & set(seen.body)
    stored = json.dumps([completion.raw_request, completion.raw_response])
    assert KEY not in stored and "RECORDED-ANSWER" not in stored


def test_provider_specifics(wire, fake):
    spec, org = wire
    fake.script(Reply(200, spec.success))
    completion = call(org, spec)
    seen = fake.seen[-1]
    if spec.provider == "openrouter":
        assert seen.headers["x-title"] == "PRBench" and seen.headers["http-referer"]
        assert seen.body["usage"] == {"include": True}
        assert completion.cost_usd == Decimal("0.00042")
    elif spec.provider == "azure_openai":
        assert "api-version=2024-10-21" in seen.path
    elif spec.provider == "anthropic":
        assert seen.body["system"] == "You write patches."
    else:
        assert seen.body["messages"][0] == {"role": "system", "content": "You write patches."}
        assert completion.usage.cached_tokens == 4


STATUS_CASES = [
    (400, "Invalid value for 'temperature'", None, ErrorCategory.BAD_REQUEST),
    (
        400,
        "This model's maximum context length is 8192 tokens",
        "context_length_exceeded",
        ErrorCategory.CONTEXT_LENGTH_EXCEEDED,
    ),
    (
        400,
        "The response was filtered due to the prompt triggering content_filter policy",
        "content_filter",
        ErrorCategory.CONTENT_FILTERED,
    ),
    (401, "Incorrect API key provided", "invalid_api_key", ErrorCategory.AUTHENTICATION),
    (403, "You are not allowed to sample from this model", None, ErrorCategory.PERMISSION),
    (404, "The model `nope` does not exist", "model_not_found", ErrorCategory.MODEL_NOT_FOUND),
    (408, "Request timed out", None, ErrorCategory.PROVIDER_TIMEOUT),
    (504, "Gateway timeout", None, ErrorCategory.PROVIDER_TIMEOUT),
    (422, "Unprocessable", None, ErrorCategory.BAD_REQUEST),
    (429, "Rate limit reached", "rate_limit_exceeded", ErrorCategory.RATE_LIMITED),
    (500, "The server had an error", None, ErrorCategory.SERVER_ERROR),
    (502, "Bad gateway", None, ErrorCategory.SERVER_ERROR),
    (503, "The engine is currently overloaded", None, ErrorCategory.OVERLOADED),
    (529, "Overloaded", None, ErrorCategory.OVERLOADED),
    (418, "I'm a teapot", None, ErrorCategory.UNKNOWN),
]


@pytest.mark.parametrize("status, message, code, category", STATUS_CASES, ids=[f"{c[0]}-{c[3]}" for c in STATUS_CASES])
def test_every_status_maps_to_one_category(wire, fake, status, message, code, category):
    spec, org = wire
    fake.script(Reply(status, spec.error(message, code)))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == category
    assert KEY not in str(caught.value) and KEY not in caught.value.message


def test_429_with_retry_after_is_retried_after_the_wait(wire, fake):
    spec, org = wire
    fake.script(
        Reply(429, spec.error("slow down", "rate_limit_exceeded"), {"retry-after": "0.4"}), Reply(200, spec.success)
    )
    started = time.monotonic()
    completion = call(org, spec, max_retries=2, retry_base_ms=1)
    assert time.monotonic() - started >= 0.4
    assert completion.retries == 1 and len(fake.seen) == 2


def test_a_hang_times_out(wire, fake):
    spec, org = wire
    fake.script(Reply(200, spec.success), Reply(200, spec.success, delay_s=3))
    call(org, spec)  # the SDK's first import and client are not what is being timed
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(org, spec, timeout_read_s=0.3)
    assert caught.value.category == ErrorCategory.TIMEOUT
    assert time.monotonic() - started < 2.5


def test_the_total_timeout_bounds_a_try_whose_read_timeout_is_longer(wire, fake):
    spec, org = wire
    fake.script(Reply(200, spec.success), Reply(200, spec.success, delay_s=3), Reply(200, spec.success))
    call(org, spec)  # the SDK's first import and client are not what is being timed
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(org, spec, timeout_read_s=30, timeout_total_s=0.4, max_retries=3, retry_base_ms=1000)
    assert caught.value.category == ErrorCategory.TIMEOUT
    # Cut off at the total, and no retry started whose back-off would end past it.
    assert time.monotonic() - started < 1.5 and len(fake.seen) == 2


def test_malformed_json_is_a_server_error(wire, fake):
    spec, org = wire
    fake.script(Reply(200, "{this is not json"))
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.SERVER_ERROR


def test_an_empty_answer_is_handled(wire, fake):
    spec, org = wire
    empty = dict(spec.success, choices=[]) if "choices" in spec.success else dict(spec.success, content=[])
    fake.script(Reply(200, empty))
    if spec.provider == "anthropic":
        assert call(org, spec).text == ""  # no content blocks: an empty answer, scored as such
    else:
        with pytest.raises(ProviderError) as caught:
            call(org, spec)
        assert caught.value.category == ErrorCategory.SERVER_ERROR


def test_a_closed_port_is_a_connection_error(wire, fake):
    spec, org = wire
    fake.close()
    with pytest.raises(ProviderError) as caught:
        call(org, spec, timeout_connect_s=1)
    assert caught.value.category == ErrorCategory.CONNECTION


def test_the_allowlist_stops_the_call_before_the_network(wire, fake):
    spec, org = wire
    AllowedProvider.objects.create(org=org, provider="mock")
    with pytest.raises(ProviderError) as caught:
        call(org, spec)
    assert caught.value.category == ErrorCategory.NOT_ALLOWED
    assert fake.seen == []


def test_credentials_resolve_only_within_the_org(wire, fake):
    spec, _ = wire
    stranger = Organization.objects.create(slug="stranger", name="Stranger")
    with pytest.raises(ProviderError) as caught:
        call(stranger, spec)
    if spec.provider == "openai_compatible":
        assert caught.value.category == ErrorCategory.BAD_REQUEST  # no base URL without the credential
    else:
        assert caught.value.category == ErrorCategory.AUTHENTICATION
    assert fake.seen == []
