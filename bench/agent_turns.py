"""Platform overhead per agent turn: the agent loop against the same calls and tool runs in a bare loop.

Both loops run the mock model (zero latency) as an agent on the demo's self-contained tasks,
each in a working copy inside its sandbox session (datasets.validation.agent_workspace):

- the bare loop calls the mock adapter's ``generate`` and ``Workspace.run`` one after the
  other, with nothing around them;
- the platform's loop is ``experiments.agent.solve``: every turn through the gateway (retry
  policy, arm slot in Redis, budgets, redaction, sanity checks), journalled in Redis, recorded
  as a trajectory step, with the session bound and the metrics.

Each task is run by both loops in turn (paired, the order alternating), so the working copy's
set-up and the sandbox start cancel out, and the same turns happen in both (the mock is
seeded). The overhead per turn is the mean paired difference divided by the turns, with its
95% interval; the target is under 5 ms (issue 29). It also prints the tools' own cost per call.

    .venv/bin/python bench/agent_turns.py [--rounds 3]

Runs on the `make demo` stores (SQLite under a fresh directory, embedded Redis) with
production settings, unless DATABASE_URL / REDIS_URL are set.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import use_production_environment  # noqa: E402

TARGET_MS = 5.0
CONFIG = {"mode": "oracle", "solver": "agent", "max_turns": 30}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="times each demo task is run by each loop")
    args = parser.parse_args()
    use_production_environment()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from prbench.queues import stop_embedded_redis

    try:
        return measure(args.rounds)
    finally:
        stop_embedded_redis()  # the slots and the journal used it: no server outlives the bench


def measure(rounds: int) -> int:
    from datasets.demo import load_demo_dataset
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
    from experiments.mock_books import register_books_for
    from experiments.pipeline import run_arm_spec
    from orgs.models import Organization
    from providers import gateway

    org, _ = Organization.objects.get_or_create(slug="bench-agent", defaults={"name": "Bench agent"})
    dataset = load_demo_dataset(org)
    spec = ExperimentSpec(name="agent turns", dataset=dataset, arms=[ArmSpec("agent", "mock", "m", CONFIG)], seed=1)
    run = do_start_run(do_save_experiment(org, spec))
    attempts = list(run.attempts.select_related("task__dataset", "run", "arm"))
    register_books_for(attempts)
    prepared = gateway.prepare(org.pk, run_arm_spec(attempts[0].arm))
    print(f"{len(attempts)} demo tasks x {rounds} rounds, each run by both loops in turn")
    pairs: list[tuple[float, float, int]] = []
    tool_ms: list[float] = []
    for round_number in range(rounds):
        for index, attempt in enumerate(attempts):
            platform_first = (round_number + index) % 2 == 0
            timings = {}
            for which in ("platform", "bare") if platform_first else ("bare", "platform"):
                if which == "platform":
                    timings[which], turns = platform_loop(attempt, prepared)
                else:
                    timings[which], bare_turns, tool_times = bare_loop(attempt, prepared.arm)
                    tool_ms += tool_times
            if turns != bare_turns:
                task = attempt.task.external_id
                raise SystemExit(f"the loops took different turns on {task}: {turns} != {bare_turns}")
            pairs.append((timings["platform"], timings["bare"], turns))
        print(f"  round {round_number + 1}: {len(pairs)} pairs")
    report(pairs, tool_ms)
    return 0


def platform_loop(attempt, prepared) -> tuple[float, int]:
    from experiments import agent
    from experiments.prompts import seed_key

    started = time.perf_counter()
    answer = agent.solve(attempt, prepared, None, seed_key(attempt))
    elapsed = time.perf_counter() - started
    assert answer.error is None and answer.trajectory.ended == "submitted", answer.trajectory.ended
    return elapsed, len(answer.trajectory.steps)


def bare_loop(attempt, arm) -> tuple[float, int, list[float]]:
    """The same calls and tool runs with nothing around them."""
    from datasets.validation import agent_workspace
    from evaluation.agent_tools import tool_specs
    from experiments.agent import agent_prompt
    from experiments.prompts import seed_key
    from providers.registry import adapter_class
    from providers.types import CompletionRequest, Message

    system, user = agent_prompt(CONFIG)
    task = attempt.task
    history = [Message("user", user.format(problem=task.problem_statement, repository=""))]
    tool_times: list[float] = []
    started = time.perf_counter()
    turns = 0
    with agent_workspace(task, 8000) as workspace:
        tools = tool_specs("all", 8000)
        while True:
            turns += 1
            request = CompletionRequest(messages=tuple(history), system=system, tools=tools, seed_key=seed_key(attempt))
            answer = adapter_class("mock")(arm).generate(request)
            history.append(Message("assistant", answer.text, tool_calls=answer.tool_calls))
            results, submitted = [], False
            for call in answer.tool_calls:
                tool_started = time.perf_counter()
                outcome = workspace.run(call)
                tool_times.append((time.perf_counter() - tool_started) * 1000)
                results.append(_result(call, outcome))
                if outcome.submitted:
                    submitted = True
                    break
            if submitted or not answer.tool_calls:
                break
            history.append(Message("user", "", tool_results=tuple(results)))
        workspace.diff()
    return time.perf_counter() - started, turns, tool_times


def _result(call, outcome):
    from providers.types import ToolResult

    return ToolResult(call.id, outcome.content, outcome.is_error)


def report(pairs: list[tuple[float, float, int]], tool_ms: list[float]) -> None:
    per_turn = [(platform - bare) * 1000 / turns for platform, bare, turns in pairs]
    mean = statistics.fmean(per_turn)
    half = 1.96 * statistics.stdev(per_turn) / len(per_turn) ** 0.5 if len(per_turn) > 1 else float("nan")
    turns = sum(turns for _, _, turns in pairs)
    bare_turn = sum(bare for _, bare, _ in pairs) * 1000 / turns
    platform_turn = sum(platform for platform, _, _ in pairs) * 1000 / turns
    print(f"turns: {turns} ({turns / len(pairs):.1f} per attempt)")
    print(f"bare loop: {bare_turn:.2f} ms per turn (mock call + tools + the working copy's share)")
    print(f"platform:  {platform_turn:.2f} ms per turn")
    verdict = "within" if mean + half < TARGET_MS else "NOT within"
    print(f"platform overhead per turn: {mean:.2f} ± {half:.2f} ms (95%), {verdict} the {TARGET_MS:g} ms target")
    tool_ms.sort()
    print(
        f"tool calls: {len(tool_ms)}, median {statistics.median(tool_ms):.3f} ms, "
        f"p95 {tool_ms[int(len(tool_ms) * 0.95)]:.3f} ms (run_tests included)"
    )


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
