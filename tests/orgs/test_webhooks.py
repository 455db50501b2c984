"""Organisation webhooks: the page, the events a run sends, signing, retries and the egress rule.

Deliveries go to a real HTTP server on loopback (allowed by the test settings'
PRBENCH_ALLOWED_PRIVATE_NETWORKS), through the real RQ queue drained by a real worker.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import threading
from datetime import timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from django_rq.settings import QUEUES as rq_queues
from rq.registry import ScheduledJobRegistry

from experiments.jobs import execute_attempts
from experiments.models import RunStatus
from experiments.pipeline import finish_run_if_done
from orgs.models import AuditEvent, DeliveryStatus, Webhook, WebhookDelivery, WebhookEvent
from orgs.webhook_delivery import QUEUE, backoff_s, deliver, sweep_due_deliveries
from orgs.webhook_urls import check_webhook_url
from orgs.webhooks import check_webhook, do_create_webhook, do_send_test
from prbench.queues import get_queue
from tests.conftest import client_for, work_queue

ALL_EVENTS = [WebhookEvent.RUN_COMPLETED, WebhookEvent.RUN_FAILED, WebhookEvent.RUN_BUDGET_EXCEEDED]


class Receiver:
    """A webhook receiver on 127.0.0.1 answering with scripted statuses (then 200), keeping
    each request's headers and raw body."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                answer = b'{"ok": true}' if status < 400 else b"receiver says no\x1b[31m"
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[str]:
        return [headers["x-prbench-event"] for headers, _ in self.received]


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def hook(org, alice, receiver):
    webhook, secret = do_create_webhook(org, receiver.url, list(ALL_EVENTS), alice)
    return webhook, secret


@pytest.fixture
def drain(django_capture_on_commit_callbacks):
    """Work the queues as the commits would: a job's on-commit callbacks (a delivery queued
    when a run finishes) run after it, and the jobs they queue are worked in turn."""

    def work() -> None:
        for _ in range(5):
            with django_capture_on_commit_callbacks(execute=True) as callbacks:
                work_queue()
            if not callbacks:
                return

    return work


@pytest.fixture
def send_test(django_capture_on_commit_callbacks):
    """ "Send test", committed: its job is queued as the commit would queue it."""

    def send(webhook: Webhook) -> WebhookDelivery:
        with django_capture_on_commit_callbacks(execute=True):
            return do_send_test(webhook)

    return send


def verified(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """What a receiver does (the README's snippet): HMAC-SHA256 of "<timestamp>.<body>"."""
    expected = hmac.new(secret.encode(), headers["x-prbench-timestamp"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(headers["x-prbench-signature"], "sha256=" + expected.hexdigest())


def overdue(delivery: WebhookDelivery) -> None:
    """Time passes: its next try is long due (and its scheduled job, say, was lost)."""
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=5))


# --- events from a run ---------------------------------------------------------------------


def test_a_completed_run_is_delivered_once_signed(drain, hook, experiment, start, receiver):
    secret = hook[1]
    run = start(experiment, inference_only=True)
    drain()

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    delivery = WebhookDelivery.objects.get()
    assert (delivery.event, delivery.status, delivery.attempts, delivery.response_status) == (
        WebhookEvent.RUN_COMPLETED,
        DeliveryStatus.DELIVERED,
        1,
        200,
    )
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    assert verified(secret, headers, body)
    assert not verified("whsec_someone-else", headers, body)
    assert headers["x-prbench-event"] == "run.completed"
    assert headers["x-prbench-delivery"] == str(delivery.code)
    assert headers["content-type"] == "application/json"
    payload = json.loads(body)
    assert payload["event"] == "run.completed" and payload["delivery"] == str(delivery.code)
    assert payload["org"] == "acme"
    assert payload["run"]["id"] == str(run.code)
    assert payload["run"]["experiment"]["id"] == str(experiment.code)
    assert payload["run"]["status"] == "completed"
    assert payload["run"]["url"].endswith(reverse("experiments:run", args=[run.code]))
    assert payload["run"]["attempts"]["total"] == run.total_attempts == payload["run"]["attempts"]["completed"]
    assert payload["run"]["finished_at"] is not None
    assert "rationale" not in body.decode() and secret not in body.decode()


def test_running_the_finishing_job_again_sends_nothing_more(drain, hook, experiment, start, receiver):
    run = start(experiment, inference_only=True)
    drain()
    delivery = WebhookDelivery.objects.get()

    assert finish_run_if_done(run.pk) is None
    execute_attempts(run.pk, list(run.attempts.values_list("pk", flat=True)))
    assert deliver(delivery.pk) is None  # delivered already: never sent again
    drain()

    assert WebhookDelivery.objects.count() == 1
    assert len(receiver.received) == 1


def test_a_run_with_no_answer_sends_run_failed_and_a_budget_stop_sends_budget_exceeded(
    drain, hook, experiment, start, receiver
):
    run = start(experiment, inference_only=True, budget_usd=Decimal("0.00"))  # every call would pass it: none is made
    drain()

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert sorted(WebhookDelivery.objects.values_list("event", "status")) == [
        (WebhookEvent.RUN_BUDGET_EXCEEDED, DeliveryStatus.DELIVERED),
        (WebhookEvent.RUN_FAILED, DeliveryStatus.DELIVERED),
    ]
    assert sorted(receiver.events()) == ["run.budget_exceeded", "run.failed"]
    budget = next(json.loads(body) for headers, body in receiver.received if b"budget_exceeded" in body)["budget"]
    assert budget["run_limit_usd"] == "0.00"
    assert budget["attempts_not_made"] >= 1


def test_only_active_webhooks_subscribed_to_the_event_receive_it(drain, org, alice, experiment, start, receiver):
    do_create_webhook(org, receiver.url, [WebhookEvent.RUN_FAILED], alice)
    disabled, _ = do_create_webhook(org, receiver.url, [WebhookEvent.RUN_COMPLETED], alice)
    Webhook.objects.filter(pk=disabled.pk).update(active=False)
    start(experiment, inference_only=True)
    drain()

    assert WebhookDelivery.objects.count() == 0
    assert receiver.received == []


# --- retries -------------------------------------------------------------------------------


def test_a_500_is_tried_again_later_and_ends_delivered(send_test, drain, hook, receiver):
    webhook, secret = hook
    receiver.statuses = [500]
    delivery = send_test(webhook)
    drain()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.PENDING, 1, 500)
    assert delivery.error.startswith("HTTP 500: receiver says no")
    assert "\x1b" not in delivery.error
    assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=backoff_s(1) - 5)
    assert len(ScheduledJobRegistry(queue=get_queue(QUEUE))) == 1  # RQ's scheduler holds the retry
    assert deliver(delivery.pk) is None  # not due yet: a duplicate job sends nothing

    overdue(delivery)
    assert sweep_due_deliveries() == 1
    drain()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.DELIVERED, 2, 200)
    assert delivery.error == "" and delivery.delivered_at is not None
    assert [headers["x-prbench-delivery"] for headers, _ in receiver.received] == [str(delivery.code)] * 2
    assert all(verified(secret, headers, body) for headers, body in receiver.received)
    assert sweep_due_deliveries() == 0


def test_a_400_is_final(send_test, drain, hook, receiver):
    receiver.statuses = [400]
    delivery = send_test(hook[0])
    drain()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.FAILED, 1, 400)
    assert len(ScheduledJobRegistry(queue=get_queue(QUEUE))) == 0
    overdue(delivery)
    assert sweep_due_deliveries() == 0
    assert deliver(delivery.pk) is None
    assert len(receiver.received) == 1


def test_tries_stop_at_the_limit(send_test, drain, hook, receiver, settings):
    settings.PRBENCH_WEBHOOK_MAX_ATTEMPTS = 2
    receiver.statuses = [503, 429]
    delivery = send_test(hook[0])
    drain()
    overdue(delivery)
    sweep_due_deliveries()
    drain()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.FAILED, 2, 429)
    assert len(receiver.received) == 2


def test_no_answer_is_tried_again(send_test, drain, org, alice, receiver):
    webhook, _ = do_create_webhook(org, receiver.url, list(ALL_EVENTS), alice)
    receiver.close()  # nothing listens on the port any more
    delivery = send_test(webhook)
    drain()

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == (DeliveryStatus.PENDING, 1, None)
    assert delivery.error.startswith("no answer: ConnectError")


def test_the_backoff_doubles_up_to_an_hour():
    assert [backoff_s(tries) for tries in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert backoff_s(20) == 3600


# --- the address ---------------------------------------------------------------------------


def test_loopback_is_refused_unless_allowed(org, receiver, settings):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = ()
    for url in (receiver.url, "https://127.0.0.1/hook", "https://[::1]/hook", "https://169.254.169.254/latest"):
        with pytest.raises(ValidationError, match="not a public internet address"):
            check_webhook(org, url, ALL_EVENTS)


def test_a_webhook_saved_while_allowed_is_refused_at_delivery_once_not(send_test, drain, hook, receiver, settings):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = ()
    delivery = send_test(hook[0])
    drain()

    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.FAILED
    assert "not a public internet address" in delivery.error
    assert receiver.received == []


def test_https_is_required_on_the_public_internet():
    with pytest.raises(ValidationError, match="must start with https://"):
        check_webhook_url("http://93.184.216.34/hook")  # a literal: nothing is resolved over the network
    assert check_webhook_url(" https://93.184.216.34/hook ") == "https://93.184.216.34/hook"
    for url in ("ftp://93.184.216.34/", "https://user:pass@93.184.216.34/", "https:///nohost", "hook"):
        with pytest.raises(ValidationError):
            check_webhook_url(url)


def test_events_are_checked(org, receiver):
    with pytest.raises(ValidationError, match="unknown event 'ping'"):
        check_webhook(org, receiver.url, ["ping"])
    with pytest.raises(ValidationError, match="at least one event"):
        check_webhook(org, receiver.url, [])


# --- the page ------------------------------------------------------------------------------


def test_an_owner_adds_a_webhook_and_sees_its_secret_once(
    drain, django_capture_on_commit_callbacks, alice, org, receiver, caplog
):
    caplog.set_level(logging.DEBUG)
    client = client_for(alice)
    url = reverse("orgs:webhooks", args=[org.code])

    response = client.post(url, {"url": receiver.url, "events": ["run.completed", "run.failed"]})

    assert response.status_code == 200
    webhook = Webhook.objects.get()
    assert (webhook.url, webhook.events, webhook.created_by) == (receiver.url, ["run.completed", "run.failed"], alice)
    secret = webhook.secret()
    assert secret.startswith("whsec_") and secret in response.content.decode()
    assert secret not in webhook.secret_encrypted

    page = client.get(url)
    assert page.status_code == 200
    assert receiver.url in page.content.decode() and secret not in page.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("orgs:webhook_test", args=[org.code, webhook.code]))
    drain()
    after = client.get(url).content.decode()
    assert "Delivered" in after and secret not in after
    assert secret not in caplog.text
    assert all(secret not in str(value) for value in WebhookDelivery.objects.values_list("payload", "error"))


def test_send_test_pings_through_the_queue(drain, django_capture_on_commit_callbacks, alice, org, hook, receiver):
    webhook, secret = hook
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(reverse("orgs:webhook_test", args=[org.code, webhook.code]))

    assert response.status_code == 302
    delivery = WebhookDelivery.objects.get()
    assert delivery.event == WebhookEvent.PING and delivery.status == DeliveryStatus.PENDING
    assert len(get_queue(QUEUE)) == 1
    drain()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED
    headers, body = receiver.received[0]
    assert headers["x-prbench-event"] == "ping" and verified(secret, headers, body)
    assert json.loads(body)["webhook"] == str(webhook.code)


def test_a_ping_sent_while_redis_is_down_is_kept_and_sent_by_the_sweep(
    drain, django_capture_on_commit_callbacks, alice, org, hook, receiver, monkeypatch, caplog
):
    """The delivery commits however the queue fares: the failed enqueue is logged, not raised
    into the page after the commit, and the sweep queues the delivery once Redis is back."""
    webhook, _ = hook
    reachable = rq_queues[QUEUE]
    monkeypatch.setitem(rq_queues, QUEUE, {**reachable, "URL": f"redis://127.0.0.1:{closed_port()}/0"})
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(reverse("orgs:webhook_test", args=[org.code, webhook.code]))

    assert response.status_code == 302
    assert "enqueue_deliveries" in caplog.text  # named in Django's log line, which must not itself fail
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.PENDING and not receiver.received

    monkeypatch.setitem(rq_queues, QUEUE, reachable)
    overdue(delivery)
    assert sweep_due_deliveries() == 1
    drain()
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.DELIVERED and len(receiver.received) == 1


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_admin_disables_and_deletes(send_test, drain, alice, org, hook, receiver):
    webhook, _ = hook
    client = client_for(alice)

    assert (
        client.post(reverse("orgs:webhook_active", args=[org.code, webhook.code]), {"active": "0"}).status_code == 302
    )
    webhook.refresh_from_db()
    assert not webhook.active
    delivery = send_test(webhook)
    drain()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.error) == (DeliveryStatus.FAILED, "the webhook was disabled")
    assert receiver.received == []

    assert client.post(reverse("orgs:webhook_delete", args=[org.code, webhook.code])).status_code == 302
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()
    # Each change is in the owners' audit log, by whom, naming the receiver's host and no more.
    events = AuditEvent.objects.filter(org=org).order_by("id")
    assert [(event.action, event.actor_user) for event in events] == [
        ("webhook.created", alice),
        ("webhook.disabled", alice),
        ("webhook.test_sent", None),  # sent by the fixture, as a command would
        ("webhook.deleted", alice),
    ]
    assert all(event.target == "webhook to 127.0.0.1" for event in events)


def test_a_refused_address_is_shown_and_nothing_saved(alice, org, settings):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = ()
    response = client_for(alice).post(
        reverse("orgs:webhooks", args=[org.code]), {"url": "http://127.0.0.1:9/hook", "events": ["run.failed"]}
    )

    assert response.status_code == 400
    assert "not a public internet address" in response.content.decode()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("who", ["bob", "vera"])
def test_members_and_viewers_get_403(who, request, org, hook, receiver):
    webhook, _ = hook
    client = client_for(request.getfixturevalue(who))
    page = reverse("orgs:webhooks", args=[org.code])

    assert client.get(page).status_code == 403
    assert client.post(page, {"url": receiver.url, "events": ["run.failed"]}).status_code == 403
    for name in ("webhook_active", "webhook_delete", "webhook_test"):
        assert client.post(reverse(f"orgs:{name}", args=[org.code, webhook.code])).status_code == 403
    assert Webhook.objects.get().active and not WebhookDelivery.objects.exists()


def test_outsiders_get_404(charlie, org, hook):
    webhook, _ = hook
    client = client_for(charlie)

    assert client.get(reverse("orgs:webhooks", args=[org.code])).status_code == 404
    for name in ("webhook_active", "webhook_delete", "webhook_test"):
        assert client.post(reverse(f"orgs:{name}", args=[org.code, webhook.code])).status_code == 404
    other = charlie.memberships.get().org
    assert client.post(reverse("orgs:webhook_delete", args=[other.code, webhook.code])).status_code == 404
    assert Webhook.objects.filter(pk=webhook.pk).exists() and not WebhookDelivery.objects.exists()


def test_an_event_is_queued_once_per_webhook_and_run(org, hook, experiment, start):
    from experiments.notifications import queue_run_finished

    run = start(experiment, inference_only=True)
    queue_run_finished(run.pk, RunStatus.COMPLETED)
    queue_run_finished(run.pk, RunStatus.COMPLETED)  # the code path run again: the constraint holds
    queue_run_finished(run.pk, RunStatus.CANCELLED)  # no event for a cancelled run

    assert list(WebhookDelivery.objects.values_list("event", "subject")) == [(WebhookEvent.RUN_COMPLETED, run.code)]


def test_changing_a_webhook_takes_a_post(alice, org, hook):
    """A GET (a prefetched link, a cross-site image) must not disable, delete or ping a webhook."""
    webhook, _ = hook
    client = client_for(alice)
    for name in ("orgs:webhook_active", "orgs:webhook_delete", "orgs:webhook_test"):
        assert client.get(reverse(name, args=[org.code, webhook.code])).status_code == 405, name
    webhook.refresh_from_db()
    assert webhook.active and not WebhookDelivery.objects.exists()
