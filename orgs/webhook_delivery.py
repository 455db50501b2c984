"""Sending webhook deliveries: the ``webhooks`` RQ queue's job, its retries and their sweep.

A job takes a delivery's id, claims the row with a conditional update (so two copies of a job
never both send, and a delivered or failed delivery is never sent again), signs the body and
POSTs it through the egress policy. 2xx is delivered; 429, 5xx and no answer at all are tried
again with exponential back-off (10 s, 20 s, 40 s, ... at most an hour apart, honouring a
longer Retry-After) up to ``PRBENCH_WEBHOOK_MAX_ATTEMPTS`` tries, then failed; any other status
(a 4xx, or a 3xx: redirects are not followed) is final.

Retries are RQ jobs scheduled with ``enqueue_in`` (RQ's scheduler runs inside every worker of
``rqworker-pool``). Postgres stays the source of truth: each delivery keeps ``next_attempt_at``,
and ``sweep_due_deliveries`` (run by ``requeue_stale``) queues any pending delivery whose time
has passed without a worker taking it: its job was lost with Redis, or its worker died mid-send.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import F, Q
from django.utils import timezone

from orgs.models import DeliveryStatus, WebhookDelivery
from orgs.webhook_urls import check_webhook_url
from prbench import egress, redaction
from prbench.queues import get_queue

logger = logging.getLogger(__name__)

QUEUE = "webhooks"
TIMEOUT_S = 10.0  # per phase (connect, write, read): a receiver should answer at once and work later
# Longer than a send can take (connect + write + read timeouts): a claim older than this belongs
# to a worker that died mid-send.
CLAIM_S = 60
BACKOFF_BASE_S = 10
BACKOFF_MAX_S = 3600
# RQ's scheduler and this process may disagree by a moment about "now".
EARLY_S = 5
# The sweep leaves a due delivery this long to its scheduled job before queueing it again.
SWEEP_GRACE_S = 60
USER_AGENT = "PRBench-Webhooks/1"
RETRYABLE = frozenset({429})
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]+")


def enqueue_deliveries(delivery_ids: list[int]) -> None:
    queue = get_queue(QUEUE)
    for delivery_id in delivery_ids:
        queue.enqueue(deliver, delivery_id, result_ttl=0, failure_ttl=7 * 24 * 3600)


def deliver(delivery_id: int) -> str | None:
    """Send one delivery if it is still due and nobody else is sending it; returns its status
    afterwards, or None when there was nothing to do."""
    claim = _claim(delivery_id)
    if claim is None:
        return None
    delivery, claimed_until = claim
    webhook = delivery.webhook
    if not webhook.active:
        return _record(delivery, claimed_until, DeliveryStatus.FAILED, error="the webhook was disabled")
    try:
        url = _checked_url(webhook.url)
    except ValidationError as exc:
        return _record(delivery, claimed_until, DeliveryStatus.FAILED, error=_safe("; ".join(exc.messages)))
    body = canonical_body(delivery.payload)
    secret = webhook.secret()
    redaction.remember_secret(secret)  # whatever logs a text holding it from now on shows [redacted]
    headers = signed_headers(secret, delivery.event, str(delivery.code), body, int(time.time()))
    try:
        answer = egress.post(url, body, headers, TIMEOUT_S)
    except egress.EgressRefused as exc:
        return _record(delivery, claimed_until, DeliveryStatus.FAILED, error=_safe(str(exc)))
    except egress.NoAnswer as exc:
        return _retry_or_fail(delivery, claimed_until, None, f"no answer: {exc}")
    return _recorded_answer(delivery, claimed_until, answer)


def _checked_url(url: str) -> str:
    # Again at send time: the name may resolve elsewhere now, or the allowed networks changed.
    return check_webhook_url(url)


def canonical_body(payload: dict) -> bytes:
    """The bytes sent and signed: the same for every try of a delivery."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under the secret."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signed_headers(secret: str, event: str, delivery_code: str, body: bytes, timestamp: int) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-PRBench-Event": event,
        "X-PRBench-Delivery": delivery_code,
        "X-PRBench-Timestamp": str(timestamp),
        "X-PRBench-Signature": signature(secret, timestamp, body),
    }


def _claim(delivery_id: int) -> tuple[WebhookDelivery, datetime] | None:
    now = timezone.now()
    claimed_until = now + timedelta(seconds=CLAIM_S)
    claimed = (
        WebhookDelivery.objects.filter(
            pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now + timedelta(seconds=EARLY_S)
        )
        .filter(Q(claimed_until=None) | Q(claimed_until__lt=now))
        .update(claimed_until=claimed_until, attempts=F("attempts") + 1)
    )
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("webhook__org").get(pk=delivery_id), claimed_until


def _recorded_answer(delivery: WebhookDelivery, claimed_until: datetime, answer: egress.PostAnswer) -> str | None:
    code = answer.status_code
    if 200 <= code < 300:
        return _record(delivery, claimed_until, DeliveryStatus.DELIVERED, response_status=code)
    error = _safe(f"HTTP {code}: {answer.excerpt}")
    if code in RETRYABLE or code >= 500:
        return _retry_or_fail(delivery, claimed_until, code, error, _retry_after_s(answer.retry_after))
    return _record(delivery, claimed_until, DeliveryStatus.FAILED, response_status=code, error=error)


def _retry_or_fail(
    delivery: WebhookDelivery, claimed_until: datetime, code: int | None, error: str, at_least_s: int = 0
) -> str | None:
    tries = delivery.attempts  # read after the claim, which counted this try
    if tries >= settings.PRBENCH_WEBHOOK_MAX_ATTEMPTS:
        return _record(delivery, claimed_until, DeliveryStatus.FAILED, response_status=code, error=_safe(error))
    wait_s = max(backoff_s(tries), at_least_s)
    status = _record(
        delivery,
        claimed_until,
        DeliveryStatus.PENDING,
        response_status=code,
        error=_safe(error),
        next_attempt_at=timezone.now() + timedelta(seconds=wait_s),
    )
    if status == DeliveryStatus.PENDING:
        try:
            get_queue(QUEUE).enqueue_in(timedelta(seconds=wait_s), deliver, delivery.pk, result_ttl=0)
        except Exception:
            # The row says when it is due: the sweep queues it once that time has passed.
            logger.warning("could not schedule webhook delivery %s; the sweep will", delivery.code, exc_info=True)
    return status


def backoff_s(tries: int) -> int:
    """Seconds to wait after the ``tries``-th failed try: 10, 20, 40, ... at most an hour."""
    return int(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (tries - 1)))


def _retry_after_s(value: str | None) -> int:
    """A Retry-After in seconds (its date form is ignored), at most the back-off's cap."""
    if value and value.strip().isdigit():
        return min(BACKOFF_MAX_S, int(value.strip()))
    return 0


def _record(
    delivery: WebhookDelivery, claimed_until: datetime, status: str, *, response_status: int | None = None, **fields
) -> str | None:
    """Write how the try went, only while this job's claim still holds; returns the status
    written, or None when another worker took the delivery over (our claim lapsed)."""
    now = timezone.now()
    if status == DeliveryStatus.DELIVERED:
        fields.update(delivered_at=now, error="")
    updated = WebhookDelivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PENDING, claimed_until=claimed_until
    ).update(status=status, response_status=response_status, claimed_until=None, **fields)
    if not updated:
        return None
    log = logger.info if status == DeliveryStatus.DELIVERED else logger.warning
    log("webhook delivery %s (%s): %s, HTTP %s", delivery.code, delivery.event, status, response_status or "-")
    return status


def _safe(text: str) -> str:
    """An error as the delivery log may show it: one line, no control characters, no known
    secret (a receiver may echo headers back), short."""
    return redaction.redact_known(CONTROL.sub(" ", text)).strip()[:300]


def sweep_due_deliveries(limit: int = 1000) -> int:
    """Queue pending deliveries overdue by more than ``SWEEP_GRACE_S`` that nobody is sending
    (their scheduled job was lost, or their worker died mid-send). A duplicate job is harmless:
    only one claims. Returns how many were queued."""
    now = timezone.now()
    overdue = (
        WebhookDelivery.objects.filter(
            status=DeliveryStatus.PENDING, next_attempt_at__lt=now - timedelta(seconds=SWEEP_GRACE_S)
        )
        .filter(Q(claimed_until=None) | Q(claimed_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    ids = list(overdue)
    if ids:
        enqueue_deliveries(ids)
    return len(ids)
