"""Writes to an organisation's provider settings. Views call these after access checks."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404

from orgs import audit
from orgs.models import Organization
from prbench import egress
from prbench.inputs import parse_json, text_problem
from prbench.redaction import redact_known
from providers import gateway
from providers.errors import ProviderError
from providers.models import (
    API_VERSION_MAX,
    BASE_URL_MAX,
    NAME_MAX,
    AllowedProvider,
    ProviderCredential,
)
from providers.registry import offered_providers, spec_of, test_models
from providers.types import ArmSpec, CompletionRequest, Message

PROVIDERS = offered_providers()
# Declared by each adapter (``test_model``), so a new provider brings its own.
MAX_PER_MINUTE = 2_000_000_000  # fits the column (a Postgres integer)


KEY_MAX = 512  # real keys are under 200 characters; this refuses pasted files and junk
DEPLOYMENTS_MAX = 100
DEPLOYMENT_NAME_MAX = 200


@dataclass(frozen=True)
class CredentialInput:
    provider: str
    name: str
    api_key: str = field(repr=False)  # "" keeps the stored key; never in a repr, a traceback or a debug page
    base_url: str = ""
    api_version: str = ""
    deployments: dict[str, str] = field(default_factory=dict)
    requests_per_minute: int | None = None  # None: no limit
    tokens_per_minute: int | None = None


def access_credential(org: Organization, code: object) -> ProviderCredential:
    """The org's credential with this public code; 404 for an unknown, malformed or
    another org's."""
    try:
        code = code if isinstance(code, uuid.UUID) else uuid.UUID(str(code))
    except ValueError:
        raise Http404("No such credential") from None
    credential = ProviderCredential.objects.filter(org=org, code=code).first()
    if credential is None:
        raise Http404("No such credential")
    return credential


def access_provider(provider: str) -> str:
    """A provider named in a URL: 404, not a KeyError, for one PRBench does not know."""
    if provider not in PROVIDERS:
        raise Http404("No such provider")
    return provider


def check_credential(
    org: Organization, data: dict[str, Any], editing: ProviderCredential | None = None
) -> CredentialInput:
    """Validate a credential's fields (a new one, or ``editing``, whose provider stays)."""
    errors = []
    provider = editing.provider if editing else data.get("provider", "")
    if provider not in PROVIDERS:
        errors.append(f"provider: choose one of {', '.join(PROVIDERS)}")
    name = _text(data, "name") or (editing.name if editing else "default")  # empty: as it was
    if not name or len(name) > NAME_MAX:
        errors.append(f"name: required, at most {NAME_MAX} characters")
    elif problem := text_problem(name, NAME_MAX):
        errors.append(f"name: {problem}")
    elif _name_taken(org, provider, name, editing):
        errors.append(f"name: this organisation already has a {provider} credential named {name!r}")
    deployments = _deployments(data, errors)
    base_url = _text(data, "base_url")
    if len(base_url) > BASE_URL_MAX:
        errors.append(f"base_url: at most {BASE_URL_MAX} characters")
    elif base_url and not base_url.startswith(("http://", "https://")):
        errors.append("base_url: must start with http:// or https://")
    elif base_url and (problem := egress.url_problem(base_url)):
        errors.append(f"base_url: {problem}")
    api_version = _text(data, "api_version")
    if len(api_version) > API_VERSION_MAX:
        errors.append(f"api_version: at most {API_VERSION_MAX} characters")
    if (missing := _missing_endpoint(provider, {"base_url": base_url, "api_version": api_version})) is not None:
        errors.append(missing)
    api_key = _text(data, "api_key")
    if len(api_key) > KEY_MAX:
        errors.append(f"api_key: at most {KEY_MAX} characters (is this really a key?)")
    elif any(c.isspace() for c in api_key):
        errors.append("api_key: must not contain spaces or line breaks")
    if not api_key and editing is None and (provider not in PROVIDERS or spec_of(provider).key_required):
        errors.append("api_key: required for a new credential")
    if (
        editing is not None
        and deployments is not None  # an invalid value is already named above
        and not api_key
        and (problem := moved_key_problem(editing, endpoint_of(base_url, api_version, deployments)))
    ):
        errors.append(problem)
    requests_per_minute = _per_minute_limit(data, "requests_per_minute", errors)
    tokens_per_minute = _per_minute_limit(data, "tokens_per_minute", errors)
    if errors:
        raise ValidationError(errors)
    return CredentialInput(
        provider, name, api_key, base_url, api_version, deployments or {}, requests_per_minute, tokens_per_minute
    )


def _missing_endpoint(provider: str, endpoint: dict[str, str]) -> str | None:
    """What the provider says when a credential lacks a field it cannot be called without."""
    if provider not in PROVIDERS:
        return None
    declared = spec_of(provider)
    return declared.endpoint_missing if any(not endpoint[f] for f in declared.endpoint_fields) else None


def endpoint_of(base_url: str, api_version: str, deployments: dict[str, str]) -> dict[str, Any]:
    """Everything that decides the host and path a credential's key is sent to (its provider
    too, which never changes once saved)."""
    return {"base_url": base_url, "api_version": api_version, "deployments": deployments}


def _stored_endpoint(credential: ProviderCredential) -> dict[str, Any]:
    return endpoint_of(credential.base_url, credential.api_version, credential.deployments)


def moved_key_problem(credential: ProviderCredential, endpoint: dict[str, Any]) -> str | None:
    """Why saving ``endpoint`` without the key typed again is refused, or None. The stored key
    only ever goes where it was saved for: pointing it elsewhere takes someone who knows it,
    not just someone who can open the settings page (or holds an admin's session)."""
    if not credential.api_key_encrypted:
        return None  # no key to carry anywhere
    before = _stored_endpoint(credential)
    changed = [name for name, value in endpoint.items() if before[name] != value]
    if not changed:
        return None
    return f"api_key: enter the key again to change where this credential points ({', '.join(changed)} changed)"


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    return value.strip() if isinstance(value, str) else ""


def _name_taken(org: Organization, provider: str, name: str, editing: ProviderCredential | None) -> bool:
    same = ProviderCredential.objects.filter(org=org, provider=provider, name=name)
    return same.exclude(pk=editing.pk).exists() if editing else same.exists()


def _deployments(data: dict[str, Any], errors: list[str]) -> dict[str, str] | None:
    raw = data.get("deployments")
    if isinstance(raw, dict):
        deployments: Any = raw
    else:
        try:  # the input layer's parser: bounded nesting, no duplicate keys, no NaN
            deployments = parse_json(raw or "{}")
        except (TypeError, ValueError):
            deployments = None
    valid = (
        isinstance(deployments, dict)
        and len(deployments) <= DEPLOYMENTS_MAX
        and all(
            isinstance(v, str)
            and text_problem(v, DEPLOYMENT_NAME_MAX) is None
            and text_problem(k, DEPLOYMENT_NAME_MAX) is None
            and v.strip()
            and k.strip()
            for k, v in deployments.items()
        )
    )
    if not valid:
        errors.append(
            'deployments: a JSON object of model name to deployment name, e.g. {"gpt-4o": "prod-4o"} '
            f"(at most {DEPLOYMENTS_MAX}, names of at most {DEPLOYMENT_NAME_MAX} characters)"
        )
        return None
    return deployments


def _per_minute_limit(data: dict[str, Any], name: str, errors: list[str]) -> int | None:
    raw = _text(data, name)
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
def do_save_credential(
    org: Organization, values: CredentialInput, editing: ProviderCredential | None = None, *, user: Any = None
) -> ProviderCredential:
    """Create a credential, or replace every field of ``editing`` (an empty key keeps its key)."""
    action = "credential.created" if editing is None else "credential.updated"
    if editing is None:
        credential = ProviderCredential(org=org, provider=values.provider)
    else:
        credential = ProviderCredential.objects.select_for_update().get(pk=editing.pk, org=org)
    before = _stored_endpoint(credential)
    endpoint = endpoint_of(values.base_url, values.api_version, values.deployments)
    # Again under the lock: an edit saved since check_credential read the row (a new key, a new
    # endpoint) must not be undone by a form that kept the key it never saw.
    if not values.api_key and editing is not None and (problem := moved_key_problem(credential, endpoint)):
        raise ValidationError(problem)
    if values.api_key:
        credential.set_api_key(values.api_key)
    credential.name = values.name
    credential.base_url = values.base_url
    credential.api_version = values.api_version
    credential.deployments = values.deployments
    credential.requests_per_minute = values.requests_per_minute
    credential.tokens_per_minute = values.tokens_per_minute
    credential.save()
    # Whether the key changed, never the key: the log must not become a copy of the secret.
    detail: dict[str, Any] = {
        "provider": credential.provider,
        "base_url": credential.base_url,
        "key_replaced": bool(values.api_key),
    }
    if editing is not None and before != endpoint:
        detail["endpoint_before"], detail["endpoint_after"] = before, endpoint
    audit.record(org, action, user=user, target=_credential_target(credential), detail=detail)
    return credential


@transaction.atomic
def do_delete_credential(credential: ProviderCredential, *, user: Any = None) -> None:
    audit.record(credential.org, "credential.deleted", user=user, target=_credential_target(credential))
    credential.delete()


def _credential_target(credential: ProviderCredential) -> str:
    return f"{credential.provider} credential {credential.name!r}"


@dataclass(frozen=True)
class ConnectionReport:
    ok: bool
    category: str
    message: str


def do_test_connection(org: Organization, credential: ProviderCredential, model_name: str = "") -> ConnectionReport:
    """One cheap call (a one-token answer) through the real gateway with this credential, no retries."""
    provider = credential.provider
    model = model_name.strip()[:200] or test_models().get(provider, "default")
    config = {"max_retries": 0, "timeout_read_s": 30} | ({"mode": "oracle"} if provider == "mock" else {})
    arm = ArmSpec(provider, model, config, credential=credential.name)
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
    if problem := text_problem(patterns, 2000, multiline=True):
        raise ValidationError(f"model_patterns: {problem}")
    return provider, patterns


@transaction.atomic
def do_allow(org: Organization, provider: str, patterns: str, *, user: Any = None) -> AllowedProvider:
    entry, created = AllowedProvider.objects.update_or_create(
        org=org, provider=provider, defaults={"model_patterns": patterns}
    )
    action = "allowlist.added" if created else "allowlist.changed"
    audit.record(org, action, user=user, target=provider, detail={"model_patterns": patterns.splitlines()})
    return entry


@transaction.atomic
def do_disallow(org: Organization, provider: str, *, user: Any = None) -> bool:
    deleted, _ = AllowedProvider.objects.filter(org=org, provider=provider).delete()
    if deleted:
        audit.record(org, "allowlist.removed", user=user, target=provider)
    return bool(deleted)
