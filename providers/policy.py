"""Governance: the allowlist and credential resolution, always within one organisation."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from django.db import transaction
from redis.exceptions import RedisError

from prbench.queues import get_connection
from providers.models import AllowedProvider, ProviderCredential
from providers.registry import ADAPTERS, adapter_class, arm_errors

logger = logging.getLogger(__name__)


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


def governed_reason(org_id: int, provider: str, model_name: str) -> str | None:
    """``not_allowed_reason`` for an arm whose requests leave the platform; None for one
    whose do not (a replay), which the allowlist has nothing to say about."""
    if not adapter_class(provider).sends_requests:
        return None
    return not_allowed_reason(org_id, provider, model_name)


class CredentialChoiceError(LookupError):
    """An arm's credential name matches none of the org's, or names none among several."""


def credential_names(org_id: int, provider: str) -> list[str]:
    return list(
        ProviderCredential.objects.filter(org_id=org_id, provider=provider)
        .order_by("name")
        .values_list("name", flat=True)
    )


def choose_credential(org_id: int, provider: str, name: str) -> str:
    """The name an arm's credential resolves to: ``name`` itself when the org has it, the
    org's only credential for the provider when ``name`` is empty, "" when it has none.
    Raises ``CredentialChoiceError`` (saying which names exist) otherwise."""
    names = credential_names(org_id, provider)
    if name:
        if name not in names:
            choices = f"; it has: {', '.join(names)}" if names else ""
            raise CredentialChoiceError(f"the organisation has no {provider} credential named {name!r}{choices}")
        return name
    if len(names) > 1:
        raise CredentialChoiceError(
            f"the organisation has {len(names)} {provider} credentials, so the arm must name one: {', '.join(names)}"
        )
    return names[0] if names else ""


def arm_credential_problems(org_id: int, provider: str, name: object) -> tuple[str, list[str]]:
    """The credential name to store on an arm and what is wrong with the one it asked for."""
    if not isinstance(name, str):
        return "", ["credential must be a string: the name of one of the organisation's credentials"]
    if provider not in ADAPTERS:
        return "", []  # the provider's own error says it all
    if not adapter_class(provider).uses_credential:
        return "", [f"credential: the {provider} provider uses no credential"] if name else []
    try:
        return choose_credential(org_id, provider, name.strip()), []
    except CredentialChoiceError as exc:
        return "", [f"credential: {exc}"]


def resolve_credential(org_id: int, provider: str, name: str = "") -> ResolvedCredential | None:
    """The credential an arm calls with, by (org, provider, name); None when the org has
    none for the provider and the arm names none."""
    name = choose_credential(org_id, provider, name)
    if not name:
        return None
    credential = ProviderCredential.objects.get(org_id=org_id, provider=provider, name=name)
    return ResolvedCredential(
        api_key=credential.api_key(),
        base_url=credential.base_url,
        api_version=credential.api_version,
        deployments=dict(credential.deployments or {}),
        id=credential.pk,
        requests_per_minute=credential.requests_per_minute,
        tokens_per_minute=credential.tokens_per_minute,
    )


def served_model(org_id: int, provider: str, model_name: str, credential_name: str = "") -> str:
    """The model that answers an arm's calls (``Adapter.served_model``), read from the
    credential it would call with, without its key: what estimates and budget checks price."""
    try:
        name = choose_credential(org_id, provider, credential_name)
    except CredentialChoiceError:
        return model_name  # the arm cannot run as it is; its own checks say why
    credential = ProviderCredential.objects.filter(org_id=org_id, provider=provider, name=name).first()
    deployments = dict(credential.deployments or {}) if credential else {}
    return adapter_class(provider).served_model(model_name, deployments)


def arm_problems(org_id: int, provider: str, model_name: str, config: object) -> list[str]:
    """Everything that stops this org from running this arm: bad settings or the allowlist."""
    problems = arm_errors(provider, model_name, config)
    if problems:
        return problems
    reason = governed_reason(org_id, provider, model_name)
    return [f"not_allowed: {reason}"] if reason else []


def _version_key(org_id: int) -> str:
    return f"prbench:governance:{org_id}"


def governance_version(org_id: int) -> str:
    """A token that changes whenever the org's allowlist or credentials change.

    Workers cache governance under it, so a change reaches every process on its next call
    for the price of one Redis read. A random token, not a counter: after Redis loses its
    data a counter would restart and could meet an old cached value again.
    """
    redis = get_connection()
    key = _version_key(org_id)
    version = redis.get(key)
    if version is None:
        redis.set(key, uuid.uuid4().hex, nx=True)
        version = redis.get(key)
    return version.decode() if isinstance(version, bytes) else str(version)


def bump_governance_version(org_id: int) -> None:
    """Invalidate every worker's cached governance for the org: now, and again after the
    change commits, so no worker re-caches the old rows under the new token meanwhile."""

    def bump() -> None:
        try:
            get_connection().set(_version_key(org_id), uuid.uuid4().hex)
        except RedisError:
            # Redis is down, so no worker runs; when it returns empty the token is new anyway.
            logger.warning("could not invalidate cached governance for org %s", org_id)

    bump()
    transaction.on_commit(bump)
