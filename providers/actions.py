"""Writes to an organisation's provider settings. Views call these after access checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from orgs.models import Organization
from providers import egress, gateway
from providers.errors import ProviderError
from providers.models import PROVIDER_CHOICES, AllowedProvider, ProviderCredential
from providers.redaction import redact_known
from providers.types import ArmSpec, CompletionRequest, Message

PROVIDERS = [value for value, _ in PROVIDER_CHOICES]
CHEAP_TEST_MODELS = {
    "openai": "gpt-4o-mini",
    "azure_openai": "gpt-4o-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "openrouter": "openai/gpt-4o-mini",
    "openai_compatible": "default",
    "mock": "mock",
}
MAX_PER_MINUTE = 2_000_000_000  # fits the column (a Postgres integer)


@dataclass(frozen=True)
class CredentialInput:
    provider: str
    api_key: str = field(repr=False)  # "" keeps the stored key; never in a repr, a traceback or a debug page
    base_url: str
    api_version: str
    deployments: dict[str, str]
    requests_per_minute: int | None = None  # None: no limit
    tokens_per_minute: int | None = None


def check_credential(org: Organization, data: dict[str, Any]) -> CredentialInput:
    errors = []
    provider = data.get("provider", "")
    if provider not in PROVIDERS:
        errors.append(f"provider: choose one of {', '.join(PROVIDERS)}")
    try:
        deployments = json.loads(data.get("deployments") or "{}")
    except ValueError:
        deployments = None
    if not isinstance(deployments, dict) or not all(isinstance(v, str) for v in deployments.values()):
        errors.append('deployments: a JSON object of model name to deployment name, e.g. {"gpt-4o": "prod-4o"}')
    base_url = (data.get("base_url") or "").strip()
    if base_url and not base_url.startswith(("http://", "https://")):
        errors.append("base_url: must start with http:// or https://")
    elif base_url and (problem := egress.url_problem(base_url)):
        errors.append(f"base_url: {problem}")
    if provider == "azure_openai" and (not base_url or not data.get("api_version")):
        errors.append("Azure OpenAI needs an endpoint (base_url) and an api_version")
    if provider == "openai_compatible" and not base_url:
        errors.append("an OpenAI-compatible server needs its base_url")
    exists = ProviderCredential.objects.filter(org=org, provider=provider).exists()
    if not data.get("api_key") and not exists and provider not in ("openai_compatible", "mock"):
        errors.append("api_key: required for a new credential")
    requests_per_minute = _per_minute_limit(data, "requests_per_minute", errors)
    tokens_per_minute = _per_minute_limit(data, "tokens_per_minute", errors)
    if errors:
        raise ValidationError(errors)
    return CredentialInput(
        provider,
        data.get("api_key", "").strip(),
        base_url,
        (data.get("api_version") or "").strip(),
        deployments or {},
        requests_per_minute,
        tokens_per_minute,
    )


def _per_minute_limit(data: dict[str, Any], name: str, errors: list[str]) -> int | None:
    raw = (data.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_PER_MINUTE:
        errors.append(f"{name}: a whole number from 1 to {MAX_PER_MINUTE}, or empty for no limit")
        return None
    return value


@transaction.atomic
def do_save_credential(org: Organization, values: CredentialInput) -> ProviderCredential:
    credential, _ = ProviderCredential.objects.select_for_update().get_or_create(org=org, provider=values.provider)
    if values.api_key:
        credential.set_api_key(values.api_key)
    credential.base_url = values.base_url
    credential.api_version = values.api_version
    credential.deployments = values.deployments
    credential.requests_per_minute = values.requests_per_minute
    credential.tokens_per_minute = values.tokens_per_minute
    credential.save()
    return credential


def do_delete_credential(org: Organization, provider: str) -> bool:
    deleted, _ = ProviderCredential.objects.filter(org=org, provider=provider).delete()
    return bool(deleted)


@dataclass(frozen=True)
class ConnectionReport:
    ok: bool
    category: str
    message: str


def do_test_connection(org: Organization, provider: str, model_name: str = "") -> ConnectionReport:
    """One cheap call (a one-token answer) through the real gateway, no retries."""
    model = model_name.strip() or CHEAP_TEST_MODELS.get(provider, "default")
    arm = ArmSpec(
        provider,
        model,
        {"max_retries": 0, "timeout_read_s": 30, "mode": "oracle"}
        if provider == "mock"
        else {"max_retries": 0, "timeout_read_s": 30},
    )
    request = CompletionRequest(messages=(Message("user", "Reply with OK."),), max_output_tokens=1)
    try:
        completion = gateway.complete(org.pk, arm, request)
    except ProviderError as error:
        return ConnectionReport(False, error.category, redact_known(error.message))
    # The gateway has redacted both already; again here because this text goes straight to
    # a page and a cookie, and this process knows every key it resolved.
    return ConnectionReport(
        True, "ok", redact_known(f"{completion.model_served} answered in {completion.latency_ms} ms")
    )


def check_allowlist_entry(data: dict[str, Any]) -> tuple[str, str]:
    provider = data.get("provider", "")
    if provider not in PROVIDERS:
        raise ValidationError(f"provider: choose one of {', '.join(PROVIDERS)}")
    patterns = "\n".join(line.strip() for line in (data.get("model_patterns") or "").splitlines() if line.strip())
    if len(patterns) > 2000:
        raise ValidationError("model_patterns: at most 2000 characters")
    return provider, patterns


def do_allow(org: Organization, provider: str, patterns: str) -> AllowedProvider:
    entry, _ = AllowedProvider.objects.update_or_create(
        org=org, provider=provider, defaults={"model_patterns": patterns}
    )
    return entry


def do_disallow(org: Organization, provider: str) -> bool:
    deleted, _ = AllowedProvider.objects.filter(org=org, provider=provider).delete()
    return bool(deleted)
