"""Governance: the allowlist and credential resolution, always within one organisation."""

from __future__ import annotations

from dataclasses import dataclass, field

from providers.models import AllowedProvider, ProviderCredential
from providers.registry import arm_errors


@dataclass(frozen=True)
class ResolvedCredential:
    api_key: str = field(repr=False)  # never in a repr, so never in a traceback or log line
    base_url: str = ""
    api_version: str = ""
    deployments: dict = field(default_factory=dict)
    id: int | None = None  # keys the rate limits every process shares for this credential
    requests_per_minute: int | None = None  # None: no limit
    tokens_per_minute: int | None = None


def not_allowed_reason(org_id: int, provider: str, model_name: str) -> str | None:
    """Why the org may not use this provider/model, or None when it may."""
    entries = {e.provider: e for e in AllowedProvider.objects.filter(org_id=org_id)}
    if not entries:
        return None  # no allowlist configured: the org has not restricted anything
    entry = entries.get(provider)
    if entry is None:
        return f"provider {provider!r} is not on the organisation's allowlist"
    if not entry.allows_model(model_name):
        return f"model {model_name!r} does not match the allowlist patterns for {provider}"
    return None


def resolve_credential(org_id: int, provider: str) -> ResolvedCredential | None:
    credential = ProviderCredential.objects.filter(org_id=org_id, provider=provider).first()
    if credential is None:
        return None
    return ResolvedCredential(
        api_key=credential.api_key(),
        base_url=credential.base_url,
        api_version=credential.api_version,
        deployments=dict(credential.deployments or {}),
        id=credential.pk,
        requests_per_minute=credential.requests_per_minute,
        tokens_per_minute=credential.tokens_per_minute,
    )


def arm_problems(org_id: int, provider: str, model_name: str, config: object) -> list[str]:
    """Everything that stops this org from running this arm: bad settings or the allowlist."""
    problems = arm_errors(provider, model_name, config)
    if problems:
        return problems
    reason = not_allowed_reason(org_id, provider, model_name)
    return [f"not_allowed: {reason}"] if reason else []
