"""Agent arms on the boards (issue 29): turns and tool calls per attempt, tokens and cost per
task and per resolved task, from the run's summaries and equal to a recount of its attempts;
a dash, not 0, for a single-turn arm; "(agent)" wherever an arm is named, so one model asked
once and the same model as an agent are told apart, on the boards and the pairwise page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from experiments.models import Attempt
from leaderboards.boards import run_boards
from leaderboards.summaries import refresh_run_summaries
from providers.outcomes import OutcomeClass
from tests.conftest import api_client, client_for, make_api_key
from tests.factories import ArmPlan, make_tasks, record

# One model asked once, and the same model as an agent, better and slower.
ONCE = ArmPlan("claude", quality=0.4, latency_ms=800, tokens=True, model_name="mock-claude")
LOOP = ArmPlan(
    "claude-loop",
    quality=0.7,
    latency_ms=9000,
    price="0.03",
    agent=True,
    model_name="mock-claude",
    model_failure_rate=0.1,
    infrastructure_failure_rate=0.1,
)
MODEL_TURNED = (OutcomeClass.SUCCESS, OutcomeClass.MODEL_FAILURE)


def boards_of(run):
    refresh_run_summaries(run.pk)
    return run_boards(run, {}, lambda name, sort: "")


def rows_by_label(run) -> dict:
    return {e.arm.label: e for e in boards_of(run).cost.entries}


def recount(arm) -> dict:
    """The agent figures counted again, attempt by attempt, as the board defines them."""
    attempts = list(arm.attempts.all())
    turned = [a for a in attempts if a.outcome in MODEL_TURNED and a.turns is not None]
    called = [a for a in attempts if not a.response_cached]
    with_tokens = [a for a in called if a.input_tokens is not None]
    tokens = sum(a.input_tokens + (a.output_tokens or 0) for a in with_tokens)
    answered = [a for a in called if a.status == "completed"]
    resolved = [a for a in answered if a.outcome == OutcomeClass.SUCCESS and a.resolved]
    return {
        "turns_per_attempt": sum(a.turns for a in turned) / len(turned) if turned else None,
        "tool_calls_per_attempt": sum(a.tool_calls or 0 for a in turned) / len(turned) if turned else None,
        "tokens_per_task": tokens / len(answered) if with_tokens else None,
        "tokens_per_resolved": tokens / len(resolved) if with_tokens and resolved else None,
    }


def figures(entry) -> dict:
    return {name: getattr(entry.arm, name) for name in recount_names()}


def recount_names() -> tuple[str, ...]:
    return ("turns_per_attempt", "tool_calls_per_attempt", "tokens_per_task", "tokens_per_resolved")


def test_agent_figures_are_a_recount_of_the_attempts(built_run):
    run, arms = built_run([ONCE, LOOP], repetitions=3)
    loop = arms["claude-loop"]
    # Turns on failures too: the model's own failure counts, the infrastructure's does not.
    model_failed = loop.attempts.filter(outcome=OutcomeClass.MODEL_FAILURE).first()
    infrastructure_failed = loop.attempts.filter(outcome=OutcomeClass.INFRASTRUCTURE_FAILURE).first()
    assert model_failed and infrastructure_failed
    Attempt.objects.filter(pk=model_failed.pk).update(turns=30, tool_calls=29, input_tokens=90_000, output_tokens=10)
    Attempt.objects.filter(pk=infrastructure_failed.pk).update(turns=500, tool_calls=900)

    entries = rows_by_label(run)

    assert figures(entries["claude-loop"]) == pytest.approx(recount(loop))
    assert entries["claude-loop"].arm.turns_per_attempt < 30  # the infrastructure's 500 turns left out
    assert entries["claude-loop"].arm.solver == "agent"
    once = entries["claude"].arm
    assert once.solver == "single_turn"
    assert (once.turns_per_attempt, once.tool_calls_per_attempt) == (None, None)
    assert figures(entries["claude"]) == pytest.approx(recount(arms["claude"]))
    assert once.tokens_per_task is not None  # a single-turn arm's tokens compare with the agent's


def test_a_refresh_follows_a_changed_attempt(built_run):
    """The figures are the summaries' columns, rebuilt with the rest: a write to an attempt's
    turns changes its row version, which marks the arm's summary stale (summaries.stale_arms)."""
    run, arms = built_run([ONCE, LOOP])
    loop = arms["claude-loop"]
    before = rows_by_label(run)["claude-loop"].arm.turns_per_attempt
    answered = loop.attempts.filter(outcome=OutcomeClass.SUCCESS).first()
    answered.turns += 40
    answered.save(update_fields=["turns"])

    after = rows_by_label(run)["claude-loop"].arm
    assert after.turns_per_attempt > before
    assert after.turns_per_attempt == pytest.approx(recount(loop)["turns_per_attempt"])


def test_the_run_page_names_the_agent_and_shows_its_work(alice, built_run):
    run, _ = built_run([ONCE, LOOP])
    refresh_run_summaries(run.pk)

    response = client_for(alice).get(reverse("experiments:run", args=[run.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<h2>Agents' work</h2>" in content
    assert "claude-loop (agent)" in content and "claude (agent)" not in content
    rows = dict(re.findall(r'<tr><td>([\w-]+(?: \(agent\))?) <small class="muted">(.*?)</tr>', content, re.S))
    single = re.findall(r'<td class="num">(.*?)</td>', rows["claude"])
    assert single[:2] == ["—", "—"]  # no turns, no tool calls: a dash, never 0
    assert single[2] != "—"  # its tokens per task
    agent = re.findall(r'<td class="num">(.*?)</td>', rows["claude-loop (agent)"])
    assert "—" not in agent[:4]
    assert '<td>claude-loop (agent)</td><td class="num">' in content  # its attempts in the list


def test_a_run_without_an_agent_has_no_agents_section(alice, built_run):
    run, _ = built_run([ONCE])

    content = client_for(alice).get(reverse("experiments:run", args=[run.code])).content.decode()

    assert "Agents' work" not in content and "(agent)" not in content


def test_the_api_board_carries_the_solver_and_agent_figures(org, built_run):
    run, arms = built_run([ONCE, LOOP], repetitions=2)
    refresh_run_summaries(run.pk)

    body = api_client(make_api_key(org, ["read"])).get(f"/api/runs/{run.code}/leaderboards").json()

    cost = {entry["arm"]["label"]: entry for entry in body["cost"]["entries"]}
    assert cost["claude-loop"]["arm"]["solver"] == "agent" and cost["claude"]["arm"]["solver"] == "single_turn"
    assert cost["claude-loop"]["turns_per_attempt"] == pytest.approx(recount(arms["claude-loop"])["turns_per_attempt"])
    assert cost["claude"]["turns_per_attempt"] is None and cost["claude"]["tool_calls_per_attempt"] is None
    assert cost["claude"]["tokens_per_task"] == pytest.approx(recount(arms["claude"])["tokens_per_task"])


def test_the_pairwise_page_compares_one_model_once_and_as_an_agent(bob, built_run, dataset):
    """The same model on the same 40 tasks: as an agent it resolves the first 30, asked once the
    first 20. The verdict names the agent as such, on the page and in the API."""
    run, _ = built_run([])
    tasks = make_tasks(dataset, 40)
    once = run.arms.create(label="claude", provider="mock", model_name="mock-claude", position=0)
    agent = run.arms.create(
        label="claude-loop", provider="mock", model_name="mock-claude", position=1, config={"solver": "agent"}
    )
    record(run, once, tasks, set(range(20)))
    record(run, agent, tasks, set(range(30)))
    refresh_run_summaries(run.pk)

    response = client_for(bob).get(reverse("leaderboards:pairwise", args=[run.code]))

    assert response.status_code == 200
    (pair,) = response.context["pairwise"].pairs
    assert (pair.a, pair.b) == ("claude", "claude-loop (agent)")
    assert pair.verdict.shared_tasks == 40 and (pair.verdict.wins, pair.verdict.losses) == (0, 10)
    assert pair.sentence.startswith("claude resolves 25.0 points less than claude-loop (agent)")
    content = response.content.decode()
    assert pair.sentence in content and "<td>claude-loop (agent)</td>" in content
    assert [r.label for r in response.context["pairwise"].ratings] == ["claude-loop (agent)", "claude"]
    body = api_client(make_api_key(run.org, ["read"])).get(f"/api/runs/{run.code}/pairwise").json()
    assert body["arms"] == ["claude", "claude-loop (agent)"]
