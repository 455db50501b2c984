"""The organisation's audit log: one function writes it, so every change is recorded the same way.

Callers say what happened and to what in words (a key's name and prefix, a credential's label),
never a secret; ``detail`` holds small facts (scopes, a status code), not request bodies.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone

from orgs.models import AuditEvent, Organization

if TYPE_CHECKING:
    from django.http import HttpRequest

    from orgs.models import ApiKey


def record(
    org: Organization,
    action: str,
    *,
    user: Any = None,
    key: ApiKey | None = None,
    target: str = "",
    detail: dict[str, Any] | None = None,
) -> AuditEvent:
    actor_user = user if user is not None and getattr(user, "is_authenticated", False) else None
    return AuditEvent.objects.create(
        org=org, action=action, actor_user=actor_user, actor_key=key, target=target[:300], detail=detail or {}
    )


def record_request(request: HttpRequest, org: Organization, action: str, **kwargs: Any) -> AuditEvent:
    """``record`` with the actor taken from the request: the API key it was made with, or the
    signed-in user."""
    return record(org, action, user=getattr(request, "user", None), key=getattr(request, "api_key", None), **kwargs)


# Key uses outnumber everything else in the log (a CI job polling a run writes one every few
# seconds), so they are kept for PRBENCH_AUDIT_KEY_USES_DAYS; changes are kept for good.
USE_ACTION = "api_key.used"
PRUNE_BATCH = 5_000


def prune_key_uses(now: datetime | None = None) -> int:
    """Delete key-use events older than the retention, a batch at a time so a large backlog
    never holds a long lock; returns how many went. Changes (keys, credentials, allowlist,
    webhooks) are never pruned."""
    days = settings.PRBENCH_AUDIT_KEY_USES_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    old = AuditEvent.objects.filter(action=USE_ACTION, at__lt=cutoff)
    deleted = 0
    while batch := list(old.values_list("pk", flat=True)[:PRUNE_BATCH]):
        deleted += AuditEvent.objects.filter(pk__in=batch).delete()[0]
    return deleted


def events_of(org: Organization) -> Any:
    return AuditEvent.objects.filter(org=org).select_related("actor_user", "actor_key")
