"""Organisation webhooks: saving them, and queueing their deliveries.

``check_webhook`` is the one validation of a webhook's address and events (the page and any
later API call it); ``do_*`` assume valid input. Events are queued by the code that makes a run's
transition, inside its transaction (``queue_event``), and sent by ``orgs/webhook_delivery.py``
on the ``webhooks`` RQ queue once that transaction commits.

The address passes the same egress policy as provider endpoints (``prbench/egress.py``) when it
is saved and again when each delivery is sent (``orgs/webhook_urls.py``, shared by both). Plain
``http://`` is accepted only for an address inside a network staff allowed explicitly in
``PRBENCH_ALLOWED_PRIVATE_NETWORKS`` (a receiver on the company's own network); anything on the
public internet must be ``https://``, since a run's numbers and its signature would otherwise
cross it readable by anyone.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from orgs import audit
from orgs.models import (
    SUBSCRIBABLE_EVENTS,
    Organization,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)
from orgs.webhook_delivery import enqueue_deliveries
from orgs.webhook_urls import check_webhook_url
from prbench.after_commit import after_commit

# A handful covers every real use (chat, CI, an incident tool); the cap keeps one run's end
# from turning into hundreds of outbound calls.
WEBHOOKS_PER_ORG_MAX = 10
SECRET_PREFIX = "whsec_"


def check_webhook(org: Organization, url: str, events: Iterable[str]) -> tuple[str, list[str]]:
    """The webhook's address and events as they will be saved, or a ValidationError."""
    chosen = list(dict.fromkeys(events))
    unknown = [event for event in chosen if event not in SUBSCRIBABLE_EVENTS]
    if unknown:
        raise ValidationError(f"unknown event {unknown[0]!r}")
    if not chosen:
        raise ValidationError("choose at least one event")
    if org.webhooks.count() >= WEBHOOKS_PER_ORG_MAX:
        raise ValidationError(f"an organisation has at most {WEBHOOKS_PER_ORG_MAX} webhooks: delete one first")
    # In the order of the choices, so the page lists them the same way whatever was posted.
    return check_webhook_url(url), [event for event in SUBSCRIBABLE_EVENTS if event in chosen]


@transaction.atomic
def do_create_webhook(org: Organization, url: str, events: list[str], user: Any) -> tuple[Webhook, str]:
    """A new webhook and its signing secret, which the caller shows once: only its encrypted
    form is kept."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    webhook = Webhook(org=org, url=url, events=events, created_by=user)
    webhook.set_secret(secret)
    webhook.save()
    audit.record(org, "webhook.created", user=user, target=_target(webhook), detail={"events": events})
    return webhook, secret


@transaction.atomic
def do_set_webhook_active(webhook: Webhook, active: bool, user: Any = None) -> None:
    Webhook.objects.filter(pk=webhook.pk).update(active=active)
    action = "webhook.enabled" if active else "webhook.disabled"
    audit.record(webhook.org, action, user=user, target=_target(webhook))


@transaction.atomic
def do_delete_webhook(webhook: Webhook, user: Any = None) -> None:
    audit.record(webhook.org, "webhook.deleted", user=user, target=_target(webhook))
    webhook.delete()  # its delivery log goes with it


def _target(webhook: Webhook) -> str:
    # The host only: a receiver's path or query can itself hold a token.
    return f"webhook to {urlsplit(webhook.url).hostname}"


def do_send_test(webhook: Webhook, user: Any = None) -> WebhookDelivery:
    """A ``ping`` to this webhook alone, through the same queue, signing and retries as events."""
    code = uuid.uuid4()
    payload = _payload(WebhookEvent.PING, code, {"org": webhook.org.slug, "webhook": str(webhook.code)})
    with transaction.atomic():
        delivery = WebhookDelivery.objects.create(
            code=code, webhook=webhook, event=WebhookEvent.PING, subject=code, payload=payload
        )
        _enqueue_on_commit([delivery.pk])
        audit.record(webhook.org, "webhook.test_sent", user=user, target=_target(webhook))
    return delivery


def queue_event(org_id: int, event: str, subject: uuid.UUID, data: Callable[[], dict]) -> list[int]:
    """One delivery of ``event`` about ``subject`` for each of the organisation's active
    webhooks subscribed to it, sent once the caller's transaction commits.

    Call it in the transaction that made the transition: a rollback then takes the deliveries
    with it, and the unique (webhook, event, subject) constraint makes a second call (a job run
    twice, two workers racing) create nothing. ``data`` (the payload's body) is built only when
    some webhook will receive it. Returns the new deliveries' ids.
    """
    webhooks = [webhook for webhook in Webhook.objects.filter(org_id=org_id, active=True) if webhook.wants(event)]
    sent = set(
        WebhookDelivery.objects.filter(webhook__in=webhooks, event=event, subject=subject).values_list(
            "webhook_id", flat=True
        )
    )
    due = [webhook for webhook in webhooks if webhook.pk not in sent]
    if not due:
        return []
    body = data()
    created = []
    for webhook in due:
        code = uuid.uuid4()
        try:
            with transaction.atomic():  # a savepoint: losing the race must not end the caller's transaction
                delivery = WebhookDelivery.objects.create(
                    code=code, webhook=webhook, event=event, subject=subject, payload=_payload(event, code, body)
                )
        except IntegrityError:
            continue  # another worker queued it first
        created.append(delivery.pk)
    _enqueue_on_commit(created)
    return created


def _payload(event: str, code: uuid.UUID, body: dict) -> dict:
    return {"event": event, "delivery": str(code), "created_at": timezone.now().isoformat(), **body}


def _enqueue_on_commit(delivery_ids: list[int]) -> None:
    if delivery_ids:
        # Robust: with Redis down the commit stands, and the sweep sends the pending deliveries.
        after_commit(enqueue_deliveries, delivery_ids)
