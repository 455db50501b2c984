"""A run with an http_agent arm, end to end: the pipeline hands each task to a team's agent
service (tests/providers/agent_server.py), the agent downloads the repository at the base
commit from PRBench's archive URL (a live server) and answers, and the answer is validated and
scored like any arm's. The signing secret is in nothing the run keeps, logs or shows."""

from __future__ import annotations

import json
import logging

import pytest
from django.urls import reverse

from datasets.models import Dataset
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import Artifact, AttemptStatus
from tests.conftest import client_for, work_queue
from tests.factories import credential, ingest_textkit
from tests.providers.agent_server import AgentServer

SECRET = "agent-signing-secret-7d3e9b1c5a2f"


@pytest.fixture
def agent():
    server = AgentServer(SECRET)
    yield server
    server.close()


def agent_experiment(org, alice, agent, dataset, **spec):
    credential(org, "http_agent", base_url=agent.url, key=SECRET)
    arm = ArmSpec("team", "http_agent", "team-agent", {"deadline_s": 60, "max_retries": 0})
    return do_save_experiment(org, ExperimentSpec(name="agent", dataset=dataset, arms=[arm], seed=3, **spec), alice)


def test_an_agent_that_fetches_the_archive_and_sends_the_gold_patch_resolves_every_task(
    org, alice, plain_textkit, agent, live_server, settings, start, caplog
):
    caplog.set_level(logging.DEBUG)
    settings.PRBENCH_BASE_URL = live_server.url
    ingest_textkit(org, plain_textkit)
    dataset = Dataset.objects.get(org=org, name="textkit")
    gold = {task.external_id: task.gold_patch for task in dataset.tasks.all()}
    agent.patch_for = lambda task: gold[task["task_id"]]
    agent.fetch_archive = True
    run = start(agent_experiment(org, alice, agent, dataset))
    work_queue()
    run.refresh_from_db()
    assert run.status == "completed"
    attempts = list(run.attempts.select_related("task"))
    assert len(attempts) == len(gold) == len(agent.fetched)
    assert all(a.status == AttemptStatus.COMPLETED and a.resolved for a in attempts)
    assert all("textkit/words.py" in names for names in agent.fetched)
    assert agent.refused == 0
    attempt = attempts[0]
    sent = attempt.request["agent_task"]
    assert sent["task_id"] == attempt.task.external_id and sent["base_commit"] == attempt.task.base_commit
    assert sent["archive_url"].startswith(f"{live_server.url}/agent-archive/") and sent["files"] == {}
    assert attempt.output == attempt.task.gold_patch and attempt.finish_reason == "submitted"
    assert attempt.cost_usd is None and attempt.input_tokens is None

    client = client_for(alice)
    pages = [client.get(reverse("experiments:attempt", args=[a.code])).content.decode() for a in attempts] + [
        client.get(reverse("experiments:run", args=[run.code])).content.decode()
    ]
    assert attempt.task.problem_statement[:40] in pages[0]
    kept = json.dumps([list(run.attempts.values()), list(Artifact.objects.values("content"))], default=str)
    for text in (kept, *pages, caplog.text):
        assert SECRET not in text
    # The archive URL is its own permission: the access log writes its path without the token.
    assert "GET /agent-archive/[token]/ 200" in caplog.text
    assert not any(a.request["agent_task"]["archive_url"].split("/")[-2] in caplog.text for a in attempts)


def test_a_malformed_answer_is_scored_as_no_patch_not_a_crash(org, alice, dataset, agent, start):
    agent.body = b"<html>502 Bad Gateway (the agent's proxy)</html>"
    run = start(agent_experiment(org, alice, agent, dataset, sample_size=2))
    work_queue()
    run.refresh_from_db()
    assert run.status == "completed"
    for attempt in run.attempts.all():
        assert attempt.status == AttemptStatus.COMPLETED
        assert (attempt.patch_present, attempt.resolved) == (False, False)
        assert attempt.output == agent.body.decode() and attempt.finish_reason == "malformed"
        assert attempt.request["agent_task"]["files"]  # a demo task is self-contained: inline


def test_every_call_for_an_attempt_carries_its_idempotency_key_on_the_post_only(org, alice, dataset, agent, start):
    agent.failures = [503]  # the first POST fails: the retry must carry the same key
    agent.polls_before_answer = 1
    experiment = agent_experiment(org, alice, agent, dataset, sample_size=1)
    experiment.arms.update(config={"deadline_s": 60, "max_retries": 1, "retry_base_ms": 1})
    run = start(experiment)
    work_queue()
    attempt = run.attempts.get()
    assert attempt.status == AttemptStatus.COMPLETED
    posts = [r.headers.get("idempotency-key") for r in agent.requests if r.method == "POST"]
    polls = [r.headers.get("idempotency-key") for r in agent.requests if r.method == "GET"]
    assert posts == [f"prbench-attempt-{attempt.code}"] * 2
    assert polls and polls == [None] * len(polls)  # a poll starts nothing: it needs no key
    assert "idempotency_key" not in attempt.request or attempt.request["idempotency_key"] == posts[0]
