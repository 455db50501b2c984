"""An agent attempt's trajectory (issue 29) on its page, step by step (turn, text, tool calls and
their outputs folded, a long output on request, per-turn figures, why it ended, turns recovered
after a restart, malformed calls marked), and in the API's attempt, with an outsider's 404."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from experiments.actions import do_start_run
from experiments.models import Artifact, ArtifactKind, Attempt
from orgs.models import Organization
from tests.conftest import api_client, client_for, make_api_key
from tests.factories import LONG_TEST_OUTPUT, agent_trajectory, give_trajectory


@pytest.fixture
def attempts(experiment, alice):
    """Two answered attempts of a run: the first an agent's with its trajectory, the second a
    single-turn answer."""
    run = do_start_run(experiment, alice)
    agent, single = run.attempts.order_by("sequence")[:2]
    Attempt.objects.filter(pk__in=[agent.pk, single.pk]).update(status="completed", outcome="model_success")
    give_trajectory(agent)
    return agent, single


def attempt_page(user, attempt):
    return client_for(user).get(reverse("experiments:attempt", args=[attempt.code]))


def output_url(attempt, turn: int, number: int) -> str:
    return reverse("experiments:attempt_tool_output", args=[attempt.code, turn, number])


def test_it_shows_the_trajectory_step_by_step(alice, attempts):
    agent, _ = attempts

    response = attempt_page(alice, agent)

    assert response.status_code == 200
    content = response.content.decode()
    assert "<h2>What the agent did</h2>" in content
    assert "3 turns · 4 tool calls" in content and "1 malformed call" in content
    assert "<strong>How it ended:</strong> The agent submitted its answer." in content
    turns = [content.index(f'id="turn-{turn}"') for turn in (1, 2, 3)]
    assert turns == sorted(turns)
    first, second, third = (content[a:b] for a, b in zip(turns, [*turns[1:], len(content)], strict=True))
    # Turn 1: its text, the call with its arguments, the output folded, the turn's figures.
    assert "Let me read the file." in first and "Called <code>read_file</code>" in first
    assert escape('"path": "textkit/wrap.py"') in first
    assert '<details class="fold tool-output">' in first and "def wrap(text, width):" in first
    assert "1200 in / 40 out · 800 ms · $0.001200 · tool_calls" in first
    assert "recovered after a restart" in first and "recovered after a restart" not in second
    assert "Turn 1 was recovered after a restart" in content
    # Turn 2: the malformed call marked, with what the model sent; the error output marked.
    assert '<span class="bad">Malformed call</span> to <code>replace_text</code>' in second
    assert escape('{"path": "textkit/wrap.py", ') in second
    assert '<span class="bad">Error</span>' in second
    # The long output: its first lines and a link to the whole, not the whole.
    assert "test_case_0 PASSED" in second and "LAST-LINE-OF-OUTPUT" not in content
    url = output_url(agent, 2, 2)
    assert f'href="{url}" hx-get="{url}"' in second and "cut at the tool output cap" in second
    assert "cost unknown" in third and "Called <code>submit</code>" in third
    # The task as sent on the first turn, and the agent's system prompt, folded.
    assert "The task as sent" in first and "You are fixing a bug with tools." in content
    assert "<dt>Agent</dt><dd>3 turns · 4 tool calls" in content


def test_a_long_output_comes_whole_on_request(alice, attempts):
    agent, _ = attempts

    partial = client_for(alice).get(output_url(agent, 2, 2), headers={"HX-Request": "true"})
    page = client_for(alice).get(output_url(agent, 2, 2))

    assert partial.status_code == 200 and page.status_code == 200
    assert partial.content.decode() == f'<pre class="log" id="output-2-2">{escape(LONG_TEST_OUTPUT)}</pre>'
    assert "<html" in page.content.decode() and escape(LONG_TEST_OUTPUT) in page.content.decode()


@pytest.mark.parametrize(("turn", "number"), [(4, 1), (2, 3), (1, 0)])
def test_a_call_that_is_not_there_is_not_found(alice, attempts, turn, number):
    agent, _ = attempts
    assert client_for(alice).get(output_url(agent, turn, number)).status_code == 404


def test_it_checks_ownership(charlie, attempts):
    agent, _ = attempts
    assert attempt_page(charlie, agent).status_code == 404
    assert client_for(charlie).get(output_url(agent, 2, 2)).status_code == 404
    outsider = api_client(make_api_key(Organization.objects.get(slug="other")))
    assert outsider.get(f"/api/attempts/{agent.code}").status_code == 404


def test_a_single_turn_attempt_has_no_trajectory(alice, attempts):
    _, single = attempts

    content = attempt_page(alice, single).content.decode()

    assert "What the agent did" not in content and "<dt>Agent</dt>" not in content
    assert client_for(alice).get(output_url(single, 1, 1)).status_code == 404


def test_an_unreadable_trajectory_does_not_break_the_page(alice, org, attempts):
    agent, _ = attempts
    Artifact.objects.filter(attempt=agent, kind=ArtifactKind.TRAJECTORY).update(content="{not json")

    response = attempt_page(alice, agent)
    body = api_client(make_api_key(org, ["read"])).get(f"/api/attempts/{agent.code}").json()

    assert response.status_code == 200 and "What the agent did" not in response.content.decode()
    assert body["trajectory"] is None and body["turns"] == 3


def test_the_api_attempt_carries_turns_tool_calls_and_the_trajectory(org, attempts):
    agent, single = attempts
    reader = api_client(make_api_key(org, ["read"]))

    agents = reader.get(f"/api/attempts/{agent.code}").json()
    singles = reader.get(f"/api/attempts/{single.code}").json()
    listed = reader.get(f"/api/runs/{agent.run.code}/attempts").json()["items"]

    assert (agents["turns"], agents["tool_calls"]) == (3, 4)
    assert agents["trajectory"] == json.loads(agent_trajectory().to_json())
    assert agents["trajectory"]["steps"][1]["tool_calls"][0]["malformed"] == '{"path": "textkit/wrap.py", '
    assert (singles["turns"], singles["tool_calls"], singles["trajectory"]) == (None, None, None)
    by_id = {item["id"]: item for item in listed}
    assert (by_id[str(agent.code)]["turns"], by_id[str(agent.code)]["tool_calls"]) == (3, 4)
    assert by_id[str(single.code)]["turns"] is None
