"""The http_agent provider against a small agent service (tests/providers/agent_server.py) over
a real socket, through the gateway: the signed request, the synchronous and polled answers,
each outcome class, and the secret kept out of everything PRBench keeps or logs."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.models import ProviderCredential
from providers.registry import arm_errors
from providers.types import AgentTask, ArmSpec, CompletionRequest, Message
from tests.conftest import client_for
from tests.factories import credential
from tests.providers.agent_server import AgentServer

SECRET = "agent-signing-secret-4f9c2a7e1b8d"
PATCH = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
TASK = AgentTask(
    task_id="demo-1",
    problem_statement="x should be 2",
    files={"a.py": "x = 1\n"},
    test_command=("python", "-m", "pytest"),
    deadline_s=30,
)
REQUEST = CompletionRequest(messages=(Message("user", TASK.problem_statement),), agent_task=TASK)


@pytest.fixture
def agent():
    server = AgentServer(SECRET, patch_for=lambda task: PATCH)
    yield server
    server.close()


@pytest.fixture
def team(org, agent):
    credential(org, "http_agent", base_url=agent.url, key=SECRET)
    return org


def ask(org, request=REQUEST, **config):
    arm = ArmSpec("http_agent", "team-agent", {"max_retries": 0, "retry_base_ms": 1, **config})
    return gateway.complete(org.pk, arm, request)


def test_it_sends_the_signed_task_and_takes_the_patch(team, agent):
    started = datetime.now().astimezone()
    completion = ask(team, deadline_s=30)
    assert (completion.text, completion.finish_reason) == (PATCH, "submitted")
    assert completion.cost_usd is None and not completion.usage_reported
    assert completion.model_served == "team-agent" and completion.latency_ms >= 0
    [sent] = agent.requests
    assert (sent.method, sent.path, agent.refused) == ("POST", "/agent", 0)
    body = sent.json()
    assert body["protocol"] == "prbench-agent/1"
    assert body["task"] == {
        "task_id": "demo-1",
        "problem_statement": "x should be 2",
        "repo": "",
        "base_commit": "",
        "archive_url": "",
        "files": {"a.py": "x = 1\n"},
        "test_command": ["python", "-m", "pytest"],
        "deadline_s": 30,
    }
    deadline = datetime.fromisoformat(body["deadline"])
    assert started + timedelta(seconds=28) <= deadline <= started + timedelta(seconds=32)
    assert completion.raw_request == body  # the body as sent: no secret, no signature
    assert completion.raw_response == {"status": 200, "body": {"patch": PATCH}}


def test_it_polls_the_agent_until_the_patch_comes(team, agent):
    agent.polls_before_answer = 2
    completion = ask(team)
    assert completion.text == PATCH
    assert [(r.method, r.path) for r in agent.requests] == [("POST", "/agent")] + [("GET", "/jobs/1")] * 3
    assert agent.refused == 0  # every poll was signed too
    assert completion.raw_response["polls"] == 3
    assert completion.raw_response["accepted"] == {"status": 202, "body": {"poll_url": "/jobs/1", "retry_after": 0.05}}


def test_a_wrong_secret_is_refused_by_the_agent_as_authentication(team, agent):
    agent.secret = "the-agent-expects-another-secret"
    with pytest.raises(ProviderError) as refused:
        ask(team, max_retries=2)
    assert refused.value.category == ErrorCategory.AUTHENTICATION
    assert (agent.refused, len(agent.requests)) == (1, 1)  # not retried: it cannot succeed


@pytest.mark.parametrize(
    ("status", "category", "posts"),
    [(503, ErrorCategory.SERVER_ERROR, 2), (400, ErrorCategory.BAD_REQUEST, 1), (403, ErrorCategory.AUTHENTICATION, 1)],
)
def test_each_failure_has_its_outcome_class_and_only_transient_ones_are_retried(team, agent, status, category, posts):
    agent.failures = [status, status]
    with pytest.raises(ProviderError) as failed:
        ask(team, max_retries=1)
    assert failed.value.category == category
    assert len(agent.requests) == posts


def test_a_transient_failure_is_retried_and_the_retry_answers(team, agent):
    agent.failures = [502]
    completion = ask(team, max_retries=1)
    assert (completion.text, completion.retries) == (PATCH, 1)


def test_an_agent_that_answers_after_its_deadline_times_out(team, agent):
    agent.delay_s = 3
    started = time.monotonic()
    with pytest.raises(ProviderError) as late:
        ask(team, deadline_s=0.5, max_retries=2)
    assert late.value.category == ErrorCategory.TIMEOUT
    assert "by its deadline" in late.value.message
    assert time.monotonic() - started < 2.5 and len(agent.requests) == 1


def test_an_agent_still_busy_at_its_deadline_times_out_while_polled(team, agent):
    agent.polls_before_answer = 10**6
    agent.retry_after = 0.1
    started = time.monotonic()
    with pytest.raises(ProviderError) as late:
        ask(team, deadline_s=1)
    assert late.value.category == ErrorCategory.TIMEOUT
    assert 0.9 < time.monotonic() - started < 2.5
    assert len(agent.requests) > 2


@pytest.mark.parametrize(
    "body", [b"<html>the agent crashed</html>", b'{"patch": 3}', b'{"diff": "..."}', b"[" * 100_000 + b"]" * 100_000]
)
def test_a_malformed_answer_is_the_agents_answer_not_a_crash(team, agent, body):
    agent.body = body
    completion = ask(team)
    assert completion.text == body.decode()
    assert completion.finish_reason == "malformed"
    assert "not the documented one" in completion.warnings[0]


def test_a_poll_url_on_another_origin_is_never_polled(team, agent):
    elsewhere = AgentServer(SECRET)
    try:
        agent.polls_before_answer = 1
        agent.poll_url = elsewhere.url.replace("/agent", "/steal")
        completion = ask(team)
    finally:
        elsewhere.close()
    assert elsewhere.requests == []
    assert [r.method for r in agent.requests] == ["POST"]
    assert completion.finish_reason == "malformed"
    assert "not on the endpoint's origin" in completion.warnings[0]


@pytest.mark.parametrize("poll_url", ["http://127.0.0.1:99999/x", "http://[::1/x", ""])
def test_a_poll_url_that_is_no_url_is_a_malformed_answer(team, agent, poll_url):
    agent.polls_before_answer, agent.poll_url = 1, poll_url
    completion = ask(team)
    assert completion.finish_reason == "malformed"
    assert [r.method for r in agent.requests] == ["POST"]


def test_an_endpoint_outside_the_egress_policy_is_refused(org, settings):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = []
    credential(org, "http_agent", base_url="http://127.0.0.1:9/agent", key=SECRET)
    with pytest.raises(ProviderError) as refused:
        ask(org)
    assert refused.value.category == ErrorCategory.EGRESS_REFUSED


def test_the_secret_is_in_nothing_kept_or_logged(team, agent, caplog):
    caplog.set_level(logging.DEBUG)
    # An agent that echoes the secret back is redacted like any provider quoting a key.
    agent.patch_for = lambda task: f"{PATCH}# signed with {SECRET}\n"
    completion = ask(team)
    agent.secret = "another"
    with pytest.raises(ProviderError) as refused:
        ask(team)
    kept = json.dumps([completion.raw_request, completion.raw_response, completion.text, completion.warnings])
    assert SECRET not in kept and "[redacted]" in kept
    assert SECRET not in refused.value.message and SECRET not in json.dumps(refused.value.raw_request)
    assert SECRET not in caplog.text


def test_a_request_without_a_task_is_refused_before_anything_is_sent(team, agent):
    with pytest.raises(ProviderError) as refused:
        ask(team, request=CompletionRequest(messages=(Message("user", "Reply with OK."),)))
    assert refused.value.category == ErrorCategory.BAD_REQUEST
    assert agent.requests == []


def test_an_arm_declares_its_deadline_and_cannot_be_run_as_an_agent():
    assert arm_errors("http_agent", "team-agent", {"deadline_s": 600, "max_concurrency": 4}) == []
    assert arm_errors("http_agent", "team-agent", {"deadline_s": 0}) == [
        "config.deadline_s must be a positive number of seconds, at most 86400"
    ]
    assert any(
        "temperature is not a http_agent setting" in e for e in arm_errors("http_agent", "a", {"temperature": 0})
    )
    assert any("base_url is not an arm setting" in e for e in arm_errors("http_agent", "a", {"base_url": "http://x"}))


@pytest.fixture
def example_agent():
    """examples/http_agent.py as the README tells a team to run it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    example = Path(django_settings.BASE_DIR) / "examples" / "http_agent.py"
    process = subprocess.Popen(
        [sys.executable, str(example), str(port)], env={**os.environ, "PRBENCH_AGENT_SECRET": SECRET}
    )
    try:
        for _ in range(100):
            with socket.socket() as knock:
                if knock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_readmes_example_agent_checks_the_signature_and_answers(org, example_agent):
    credential(org, "http_agent", name="right", base_url=example_agent, key=SECRET)
    credential(org, "http_agent", name="wrong", base_url=example_agent, key="not-the-agents-secret-0000")
    arm = ArmSpec("http_agent", "example", {"max_retries": 0}, credential="right")
    completion = gateway.complete(org.pk, arm, REQUEST)
    assert (completion.text, completion.finish_reason) == ("", "submitted")  # its solve() is yours to write
    with pytest.raises(ProviderError) as refused:
        gateway.complete(org.pk, replace(arm, credential="wrong"), REQUEST)
    assert refused.value.category == ErrorCategory.AUTHENTICATION


def test_an_owner_saves_the_endpoint_and_secret_on_the_settings_page(alice, org, agent):
    client = client_for(alice)
    page = client.get(reverse("providers:settings", args=[org.code])).content.decode()
    assert '<option value="http_agent">Your own agent (HTTP)</option>' in page
    data = {"provider": "http_agent", "name": "ours", "base_url": agent.url, "api_key": SECRET, "deployments": ""}
    assert client.post(reverse("providers:save_credential", args=[org.code]), data).status_code == 302
    saved = ProviderCredential.objects.get(org=org, provider="http_agent")
    assert (saved.base_url, saved.api_key()) == (agent.url, SECRET)
    assert SECRET not in client.get(reverse("providers:settings", args=[org.code])).content.decode()
    assert ask(org).text == PATCH
