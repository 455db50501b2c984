"""Which settings an arm's ``config`` may hold, declared once per adapter.

Every key an adapter, the gateway or the request builder reads is declared with a check,
and nothing else is accepted: a typo (``qualty``) or a wrong type (``temperature: "hot"``)
is refused at save with the key named, by the web form, ``apply_experiment`` and the API
alike, because all of them ask ``config_errors``. Adding a setting is one line in the
adapter's ``config_keys``.

Where a request goes, and with which identity, belongs to the credential an owner set up,
never to an arm: an arm that could choose the URL could send the organisation's key to its
own server. Those keys get their own refusal, and ``runtime_config`` drops every key that
is not declared, so one written straight into an old row is ignored by the gateway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# Returns what is wrong with a value ("must be ..."), or None when it is fine.
Check = Callable[[Any], str | None]

# Anything an SDK client would use to choose where, or as whom, a request is sent.
ROUTING_KEYS = frozenset(
    {
        "base_url",
        "api_base",
        "base",
        "url",
        "host",
        "endpoint",
        "azure_endpoint",
        "api_version",
        "deployment",
        "deployment_name",
        "azure_deployment",
        "deployments",
        "organization",
        "project",
        "api_key",
        "azure_ad_token",
        "azure_ad_token_provider",
        "auth_token",
        "default_headers",
        "extra_headers",
        "headers",
        "default_query",
        "extra_query",
        "proxy",
        "proxies",
        "http_client",
        "websocket_base_url",
        "credential",
    }
)
# Body fields an arm may not set through ``extra_body``: the model is the arm's (and the
# allowlist checks it); ``models``/``route`` are OpenRouter's fallbacks to other models.
RESERVED_BODY_KEYS = frozenset({"model", "models", "route", "stream", "messages"})


def number(low: float, high: float) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"must be a number between {low} and {high}"

    return check


def integer(low: int, high: int) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"must be a whole number between {low} and {high}"

    return check


def positive_seconds(high: float = 86_400) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= high
        return None if ok else f"must be a positive number of seconds, at most {high:g}"

    return check


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def choice(*values: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in values else f"must be one of {', '.join(values)}"

    return check


def body_fields(value: Any) -> str | None:
    """``extra_body`` only adds JSON fields to the request body; it may not replace the
    model or carry anything that looks like routing."""
    if not isinstance(value, dict):
        return "must be an object"
    refused = sorted(k for k in value if k in RESERVED_BODY_KEYS or k in ROUTING_KEYS)
    if refused:
        return f"may not set {', '.join(refused)} (the model and the endpoint are not the arm's to change)"
    return None


# Read for every provider: the gateway's retry and concurrency settings, and the request
# builder's sampling settings (experiments/prompts.py).
COMMON_KEYS: dict[str, Check] = {
    "max_retries": integer(0, 20),
    "retry_base_ms": number(0, 600_000),
    "retry_deadline_s": number(0.001, 86_400),
    "timeout_total_s": number(0.001, 86_400),
    "max_concurrency": integer(1, 1024),
    "max_tokens": integer(1, 1_000_000),
    "temperature": number(0, 2),
    "top_p": number(0, 1),
}
# OpenAI's ReasoningEffort enum (the OpenAPI document in shared/specs); not every reasoning
# model takes every value, and the provider says which in its 400.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# Anthropic's floor for an extended-thinking budget.
THINKING_BUDGET_MIN = 1024

# Read by every adapter that speaks HTTP (providers/adapters/timeouts.py).
HTTP_KEYS: dict[str, Check] = {
    "timeout_connect_s": positive_seconds(),
    "timeout_read_s": positive_seconds(),
    "extra_body": body_fields,
    # Stream the answer (SSE), for time to first token and output speed; off for a server
    # that cannot stream.
    "stream": boolean,
}


# Settings that change how a call is made, never what it answers: the gateway's retry,
# deadline and concurrency, the HTTP timeouts, and the mock's simulated delay. The response
# cache (providers/response_cache.py) leaves them out of its key, so raising a timeout does
# not throw away every stored answer; every other declared key is part of it.
OPERATIONAL_KEYS = frozenset(
    {
        "max_retries",
        "retry_base_ms",
        "retry_deadline_s",
        "timeout_total_s",
        "max_concurrency",
        "timeout_connect_s",
        "timeout_read_s",
        "latency_ms",
        "jitter_ms",
    }
)


def answer_config(config: dict) -> dict:
    """The settings that shape the answer: the config without its operational keys."""
    return {name: value for name, value in config.items() if name not in OPERATIONAL_KEYS}


def config_key_errors(provider: str, keys: Mapping[str, Check], config: dict) -> list[str]:
    """Every routing, unknown or ill-typed key, each named, in a stable order."""
    errors = []
    for name in sorted(config, key=str):
        if name in ROUTING_KEYS:
            errors.append(
                f"config.{name} is not an arm setting: where requests go, and with which identity, belongs "
                "to the credential an owner or admin set up; choose one by name with `credential`"
            )
        elif name not in keys:
            errors.append(f"config.{name} is not a {provider} setting (known: {', '.join(sorted(keys))})")
        else:
            problem = keys[name](config[name])
            if problem:
                errors.append(f"config.{name} {problem}")
    return errors


def runtime_config(keys: Mapping[str, Check], config: dict) -> dict:
    """The config the gateway hands an adapter: declared, well-formed keys only, whatever
    an old row (written before these checks, or straight into the database) holds."""
    return {name: value for name, value in config.items() if name in keys and keys[name](value) is None}
