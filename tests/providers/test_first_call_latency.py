"""The first call of a process measures the call: its latency, time to first token and wall
time start when the request is sent, not while the SDK's client is built or the SDK imports
what its first use needs (issue 26). Each case runs in a fresh process, as a worker's first
attempt does, against a local server that holds every answer for a fixed delay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from orgs.models import Organization
from providers.models import ProviderCredential
from tests.providers.contracts import KEY, WIRES
from tests.providers.fake_server import FakeProvider, Reply
from tests.providers.sse_fixtures import anthropic_text_events, openai_events

ROOT = Path(__file__).resolve().parents[2]
DELAY_MS = 200
# What a warm call adds to the server's delay here is a few ms; a cold SDK added 170-300 ms.
BOUND_MS = 50


@pytest.fixture
def slow_server():
    server = FakeProvider()
    yield server
    server.close()


def first_calls(org: Organization, provider: str, model: str) -> list[dict]:
    """The timings of a fresh process's first two calls (it reads this test's database, so
    the test commits: ``transaction=True``)."""
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="prbench.settings_test")
    done = subprocess.run(
        [sys.executable, "-m", "tests.providers.first_call", str(org.pk), provider, model],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", ["openai", "azure_openai", "anthropic"])
def test_the_first_call_of_a_process_measures_the_call(provider, slow_server):
    spec = WIRES[provider]
    events = anthropic_text_events() if provider == "anthropic" else openai_events()
    slow_server.default = Reply(events=events, delay_s=DELAY_MS / 1000)
    org = Organization.objects.create(slug=f"first-{provider.replace('_', '-')}", name="Org")
    credential = ProviderCredential(
        org=org,
        provider=provider,
        base_url=slow_server.url + spec.base_suffix,
        api_version=spec.api_version,
        deployments=spec.deployments or {},
    )
    credential.set_api_key(KEY)
    credential.save()

    first, warm = first_calls(org, provider, spec.model)

    assert len(slow_server.seen) == 2
    for timing in (first, warm):
        # Never less than the server's delay: the clock did start before the answer.
        assert DELAY_MS <= timing["first_token_ms"] <= timing["latency_ms"] <= timing["wall_ms"]
    assert first["latency_ms"] < DELAY_MS + BOUND_MS, first
    assert first["first_token_ms"] < DELAY_MS + BOUND_MS, first
    # Nor is the client built inside the gateway's call: the whole call, too, is the server's delay.
    assert first["wall_ms"] < DELAY_MS + BOUND_MS, first
