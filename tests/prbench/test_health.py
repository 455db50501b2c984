"""/healthz and /readyz for load balancers and supervisors: no login, no secrets, 503 naming
what is not ready."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from redis import Redis

from experiments import liveness
from experiments.models import WorkerLease


@pytest.fixture(autouse=True)
def no_other_worker(db):
    """Only the leases a test makes: this test process holds one of its own once it has
    worked the queue (its heartbeat, committed by another connection), so it is stopped and
    its row hidden from this test."""
    liveness.stop()
    WorkerLease.objects.all().delete()


def body(response) -> dict:
    return json.loads(response.content)


def live_worker(seconds: int = 60) -> WorkerLease:
    now = timezone.now()
    return WorkerLease.objects.create(
        name="w1", hostname="h", pid=1, started_at=now, expires_at=now + timedelta(seconds=seconds)
    )


def test_healthz_answers_without_a_login_or_a_query(client, db, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200 and body(response) == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_readyz_is_ready_with_postgres_redis_and_a_live_worker(client, db):
    live_worker()
    response = client.get("/readyz")
    assert response.status_code == 200
    assert body(response) == {"status": "ready", "checks": {"database": "ok", "redis": "ok", "workers": "1 live"}}


def test_readyz_is_not_ready_without_a_live_worker(client, db):
    live_worker(seconds=-5)  # its lease ran out: the process is gone
    response = client.get("/readyz")
    assert response.status_code == 503
    assert body(response)["checks"]["workers"] == "none: no worker holds a live lease"


def test_readyz_names_a_redis_that_does_not_answer_and_nothing_more(client, db, monkeypatch, settings):
    live_worker()
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = Redis(host="127.0.0.1", port=port, password="s3cret-redis-password", socket_connect_timeout=1)
    monkeypatch.setattr("experiments.health.get_connection", lambda: dead)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert body(response)["checks"]["redis"] == "failing: ConnectionError"
    assert "s3cret" not in response.content.decode() and str(port) not in response.content.decode()


def test_probes_over_plain_http_are_answered_not_redirected(db, settings):
    settings.SECURE_SSL_REDIRECT = True
    client = Client()  # a new handler: the security middleware reads the setting when built
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code in (200, 503)
    assert client.get("/accounts/login/").status_code == 301
    assert client.post("/healthz").status_code == 405
