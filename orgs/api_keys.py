"""Organisation API keys: making, revoking, authenticating and throttling them.

A key reads ``prb_`` + 40 URL-safe random characters. Only its SHA-256 is stored; its first 12
characters (``prefix``) name it on pages and in the audit log. The browser, the ``api_keys``
command and the API share ``check_create_api_key`` / ``do_create_api_key``.
"""

from __future__ import annotations

import secrets
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from orgs import audit
from orgs.models import API_KEY_PREFIX, ApiKey, ApiScope, Organization
from prbench.inputs import check_text
from prbench.queues import get_connection

NAME_MAX = int(ApiKey._meta.get_field("name").max_length or 100)
PREFIX_CHARS = 12
# "Last used" is a day-to-day fact, not a request log (the audit log is that): writing it at most
# once a minute keeps a busy key from updating its row on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def parse_scopes(value: str | list[str]) -> list[str]:
    """Scopes from "read,run" or a list, in a stable order; unknown ones are a ValidationError."""
    raw = value.split(",") if isinstance(value, str) else list(value)
    wanted = {str(scope).strip() for scope in raw if str(scope).strip()}
    unknown = sorted(wanted - set(ApiScope.values))
    if unknown:
        raise ValidationError({"scopes": f"unknown scope {unknown[0]!r}: choose from {', '.join(ApiScope.values)}"})
    if not wanted:
        raise ValidationError({"scopes": "choose at least one scope"})
    return [scope for scope in ApiScope.values if scope in wanted]


def parse_expiry(text: str) -> datetime | None:
    """An expiry date typed as YYYY-MM-DD (the key works through that day, UTC), or None for
    a key that does not expire."""
    text = text.strip()
    if not text:
        return None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise ValidationError({"expires_at": f"{text[:40]!r} is not a date (YYYY-MM-DD)"}) from None
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


def check_create_api_key(
    org: Organization, name: str, scopes: str | list[str], expires_at: datetime | None
) -> list[str]:
    """The key's scopes, once name, scopes and expiry are acceptable for ``org``."""
    try:
        check_text(name, "name", NAME_MAX)
    except ValidationError as exc:
        raise ValidationError({"name": exc.messages}) from None
    if not name.strip():
        raise ValidationError({"name": "name must not be empty"})
    parsed = parse_scopes(scopes)
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": "the expiry must be in the future"})
    if ApiKey.objects.filter(org=org, name=name, revoked_at=None).exists():
        raise ValidationError({"name": f"a key named {name!r} already exists: revoke it first or choose another name"})
    return parsed


@transaction.atomic
def do_create_api_key(
    org: Organization, name: str, scopes: list[str], expires_at: datetime | None, *, user: Any = None, key: Any = None
) -> tuple[ApiKey, str]:
    """The new key row and the key itself, which is never stored and cannot be shown again."""
    raw = API_KEY_PREFIX + secrets.token_urlsafe(30)
    api_key = ApiKey.objects.create(
        org=org,
        name=name,
        prefix=raw[:PREFIX_CHARS],
        key_hash=ApiKey.hash_key(raw),
        scopes=scopes,
        expires_at=expires_at,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    audit.record(org, "api_key.created", user=user, key=key, target=describe(api_key), detail={"scopes": scopes})
    return api_key, raw


@transaction.atomic
def do_revoke_api_key(api_key: ApiKey, *, user: Any = None, key: Any = None) -> bool:
    """Revoke ``api_key``; False when it already was (revoking twice changes nothing)."""
    changed = ApiKey.objects.filter(pk=api_key.pk, revoked_at=None).update(revoked_at=timezone.now())
    if changed:
        audit.record(api_key.org, "api_key.revoked", user=user, key=key, target=describe(api_key))
    return bool(changed)


def describe(api_key: ApiKey) -> str:
    return f"key {api_key.name} ({api_key.prefix}…)"


def authenticate(raw: str) -> ApiKey | None:
    """The usable key ``raw`` is, or None: unknown, revoked and expired keys look the same."""
    if not raw.startswith(API_KEY_PREFIX) or len(raw) > 200:
        return None
    api_key = ApiKey.objects.usable().select_related("org").filter(key_hash=ApiKey.hash_key(raw)).first()
    if api_key is not None:
        _touch(api_key)
    return api_key


def _touch(api_key: ApiKey) -> None:
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now


def throttle_wait(api_key: ApiKey) -> int:
    """Seconds the key must wait before its next request (0: go ahead).

    A fixed one-minute window per key, counted in Redis so every web process shares it. When
    Redis is down the request is let through: throttling protects the service from a runaway
    script, it must not turn a Redis blip into an API outage.
    """
    limit = settings.PRBENCH_API_REQUESTS_PER_MINUTE
    if limit <= 0:
        return 0
    now = int(timezone.now().timestamp())
    window = now // 60
    counter = f"prbench:api-throttle:{api_key.pk}:{window}"
    try:
        pipe = get_connection().pipeline()
        pipe.incr(counter)
        pipe.expire(counter, 120)
        count = int(pipe.execute()[0])
    except RedisError:
        return 0
    return 0 if count <= limit else (window + 1) * 60 - now
