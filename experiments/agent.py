"""The agent solver: a model in a loop with tools in the task's sandbox, until it submits.

An arm whose ``config["solver"]`` is ``agent`` answers a pull-request task this way instead of
in one call. Each turn is one gateway call (the arm's retries, slots, rate limits, budgets and
outcome classes apply per turn) with the history so far and the tools; the calls it makes are
run on a working copy of the repository at the base commit (evaluation/agent_tools.py), their
capped results go back as the next turn's message, and at submit (or a ceiling) the working
copy's diff is the answer, validated and scored on a fresh copy exactly like a single-turn patch.

Every turn's answer is journalled as it arrives (experiments/answer_journal.py): a worker that
dies mid-trajectory leaves the paid turns behind, and the attempt, claimed again, replays them
from the journal on a fresh working copy (the tools run again; the model is not asked again)
and goes on from the first turn nobody paid for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from redis.exceptions import RedisError

from datasets.validation import agent_workspace
from evaluation.agent_tools import ToolOutcome, Workspace, tool_specs
from evaluation.sandbox import SandboxFailed
from experiments import answer_journal, in_flight
from experiments.models import Attempt
from experiments.prompts import DEFAULT_MAX_OUTPUT_TOKENS, prompt_version
from experiments.trajectory import Ended, Step, Trajectory, call_record, cost_text, message_record
from prbench import metrics
from providers import gateway
from providers.adapters.config import solver_of
from providers.errors import ErrorCategory, ProviderError
from providers.types import USAGE_FIELDS, Completion, CompletionRequest, Message, ToolResult, Usage

DEFAULT_MAX_TURNS = 30
DEFAULT_TOOL_OUTPUT_CHARS = 8000

# The agent's prompts, by the name an arm's ``agent_prompt`` gives. Never edit one in place:
# its version (a hash of its text) is recorded with every trajectory, and a changed text is a
# new entry, so two runs' agents are comparable only when they had the same words.
AGENT_PROMPTS = {
    "agent-v1": (
        "You are a software engineer fixing an issue in a repository. You work through tools: list "
        "files, read them, search them, edit them, and run the tests, in a working copy of the "
        "repository at the commit the issue was reported against. Make the smallest change that "
        "fixes the issue; do not change the tests. When the working copy holds your fix, call "
        "submit: its changes are your answer. Tool outputs longer than the limit are cut, and say so.",
        "Fix this issue in the repository{repository}.\n\n<issue>\n{problem}\n</issue>",
    ),
}


def is_agent(config: dict) -> bool:
    return solver_of(config) == "agent"


def agent_prompt(config: dict) -> tuple[str, str]:
    return AGENT_PROMPTS[config.get("agent_prompt", "agent-v1")]


def agent_prompt_version(config: dict) -> str:
    system, user = agent_prompt(config)
    return prompt_version(system + "\n" + user)


# Agent attempts hold a sandbox session (a working copy and a process tree) for minutes: a
# worker runs at most this many at once, and an attempt waits here, unscored and uncharged,
# before its first turn. Set per process from the settings on first use.
_sessions: threading.BoundedSemaphore | None = None
_sessions_lock = threading.Lock()


def _session_slots() -> threading.BoundedSemaphore:
    global _sessions
    with _sessions_lock:
        if _sessions is None:
            _sessions = threading.BoundedSemaphore(settings.PRBENCH_AGENT_SESSIONS)
        return _sessions


def reset_session_slots() -> None:
    """Forget the bound, so the next attempt reads ``PRBENCH_AGENT_SESSIONS`` again."""
    global _sessions
    with _sessions_lock:
        _sessions = None


@contextmanager
def session_slot() -> Iterator[None]:
    slots = _session_slots()
    started = time.monotonic()
    slots.acquire()
    metrics.observe_agent_session_wait(time.monotonic() - started)
    try:
        yield
    finally:
        slots.release()


@dataclass
class AgentAnswer:
    """What the loop produced: the diff as the answer's text with the turns' figures summed,
    and the steps. ``error`` is set when a turn failed for good (the provider's or the
    platform's failure, never the model's); the turns before it were still paid for."""

    completion: Completion
    trajectory: Trajectory
    request: CompletionRequest  # the first turn's, as the attempt's request record
    error: ProviderError | None = None
    # Turns asked again: an earlier claim sent them and its worker died before the answer.
    repeat_calls: int = 0


@dataclass
class _Totals:
    usage: Usage = field(default_factory=Usage)
    latency_ms: int = 0
    wall_ms: int = 0
    retries: int = 0
    cost: Decimal | None = Decimal(0)
    usage_reported: bool = True

    def add(self, completion: Completion) -> None:
        # Every count the provider reports, cache writes included, summed over the turns.
        self.usage = Usage(
            **{name: getattr(self.usage, name) + getattr(completion.usage, name) for name in USAGE_FIELDS}
        )
        self.latency_ms += completion.latency_ms
        self.wall_ms += completion.wall_ms
        self.retries += completion.retries
        self.usage_reported &= completion.usage_reported
        # One turn of unknown price makes the attempt's cost unknown, never a partial sum.
        self.cost = None if self.cost is None or completion.cost_usd is None else self.cost + completion.cost_usd

    @property
    def tokens(self) -> int:
        return self.usage.input_tokens + self.usage.output_tokens


def solve(attempt: Attempt, prepared: gateway.PreparedArm, held_slot: str | None, seed_key: str) -> AgentAnswer:
    """Run the attempt's agent loop to its end; no database access (a pool thread runs it)."""
    config = prepared.arm.config
    system, user = agent_prompt(config)
    task = attempt.task
    named = f" {task.repo}" if task.repo else ""
    first = Message("user", user.format(problem=task.problem_statement, repository=named))
    trajectory = Trajectory(prompt_version=agent_prompt_version(config), system=system)
    recovered = answer_journal.kept_turns(attempt.pk) if attempt.claims > 1 else answer_journal.KeptTurns({}, {})
    cap = config.get("tool_output_chars", DEFAULT_TOOL_OUTPUT_CHARS)
    loop = _Loop(prepared, attempt.pk, config, system, seed_key, recovered, trajectory, attempt.claims)
    if held_slot:
        # Taken for a single call; an agent makes many, minutes apart, and may first wait for
        # a sandbox session: each turn takes a slot of its own, and waits for one like any call.
        gateway.release_slots(prepared, [held_slot])
    tool_set = config.get("tools", "all")
    with session_slot(), agent_workspace(task, cap, tool_set=tool_set) as workspace:
        tools = tool_specs(tool_set, cap)
        error = loop.run(workspace, tools, first)
        patch = workspace.diff()
    return AgentAnswer(loop.answer(patch), trajectory, loop.request((first,), tools), error, loop.repeat_calls)


class _Loop:
    def __init__(
        self,
        prepared: gateway.PreparedArm,
        attempt_id: int,
        config: dict,
        system: str,
        seed_key: str,
        recovered: answer_journal.KeptTurns,
        trajectory: Trajectory,
        claims: int = 1,
    ):
        self.prepared, self.attempt_id, self.config, self.system = prepared, attempt_id, config, system
        self.seed_key, self.recovered, self.trajectory = seed_key, recovered, trajectory
        self.totals = _Totals()
        self.claims = claims
        self.repeat_calls = 0
        self.unkept_turns = 0  # paid for on this claim, but not in the journal (Redis failed)
        self.last: Completion | None = None
        self.warnings: list[str] = []

    def run(self, workspace: Workspace, tools: tuple, first: Message) -> ProviderError | None:
        history: list[Message] = [first]
        sent: list[Message] = [first]
        max_turns = self.config.get("max_turns", DEFAULT_MAX_TURNS)
        for turn in range(1, max_turns + 1):
            if ended := self._past_a_ceiling():
                self.trajectory.ended = ended
                return None
            request = self.request(tuple(history), tools)
            try:
                completion, recovered = self._turn(turn, request)
            except ProviderError as error:
                self.trajectory.ended = Ended.INFRASTRUCTURE
                return error
            except RedisError as exc:
                if not self.unkept_turns:
                    raise  # every paid turn is journalled: the attempt goes back, and its next claim replays them
                # Handing the attempt back would pay for the unjournalled turns again: it ends
                # here as the platform's failure, the paid turns recorded with it.
                self.trajectory.ended = Ended.INFRASTRUCTURE
                why = f"Redis failed mid-trajectory ({type(exc).__name__}); the turns already paid for are recorded"
                return ProviderError(ErrorCategory.PLATFORM_ERROR, why)
            self.totals.add(completion)
            self.last = completion
            step = self._step(turn, sent, completion, recovered)
            self.trajectory.steps.append(step)
            history.append(Message("assistant", completion.text, tool_calls=completion.tool_calls))
            if not completion.tool_calls:
                self.trajectory.ended = Ended.NO_TOOL_CALL
                return None
            try:
                results, submitted = self._run_tools(workspace, completion, step)
            except SandboxFailed as exc:
                # The platform's failure mid-trajectory: the paid turns stay recorded.
                self.trajectory.ended = Ended.INFRASTRUCTURE
                return ProviderError(ErrorCategory.PLATFORM_ERROR, f"the sandbox failed while running a tool: {exc}")
            if submitted:
                self.trajectory.ended = Ended.SUBMITTED
                return None
            answer = Message("user", "", tool_results=tuple(results))
            history.append(answer)
            sent = [answer]
        self.trajectory.ended = Ended.MAX_TURNS
        return None

    def _past_a_ceiling(self) -> str:
        most_tokens = self.config.get("max_attempt_tokens")
        if most_tokens is not None and self.totals.tokens >= most_tokens:
            return Ended.TOKEN_CEILING
        most_cost = self.config.get("max_attempt_cost_usd")
        if most_cost is not None and self.totals.cost is not None and self.totals.cost >= Decimal(str(most_cost)):
            return Ended.COST_CEILING
        return ""

    def request(self, history: tuple[Message, ...], tools: tuple) -> CompletionRequest:
        config = self.config
        per_turn = config.get("max_output_tokens_per_turn", config.get("max_tokens", DEFAULT_MAX_OUTPUT_TOKENS))
        return CompletionRequest(
            messages=history,
            system=self.system,
            max_output_tokens=per_turn,
            temperature=self.config.get("temperature"),
            top_p=self.config.get("top_p"),
            seed_key=self.seed_key,
            tools=tools,
        )

    def _turn(self, turn: int, request: CompletionRequest) -> tuple[Completion, bool]:
        """The turn's answer: from the journal when an earlier claim paid for it, else asked
        and journalled at once, before its tools run."""
        if kept := self.recovered.answers.get(turn):
            # Calls sent for the turn besides the one it came from: a claim that called again
            # counted those in its own memory, and died with them.
            self.repeat_calls += self.recovered.repeat_calls.get(turn, 0)
            return kept, True
        earlier = answer_journal.mark_sent(self.attempt_id, turn)
        if self.claims > 1:
            self.repeat_calls += earlier
        with in_flight.provider_call(self.attempt_id):
            completion = gateway.call(self.prepared, request)
        if not answer_journal.keep_turn(self.attempt_id, turn, completion):
            self.unkept_turns += 1
        metrics.count_agent_turn(self.prepared.arm.provider)
        return completion, False

    def _step(self, turn: int, sent: list[Message], completion: Completion, recovered: bool) -> Step:
        return Step(
            turn=turn,
            sent=[message_record(message) for message in sent],
            text=completion.text,
            tool_calls=[call_record(call) for call in completion.tool_calls],
            input_tokens=completion.usage.input_tokens,
            output_tokens=completion.usage.output_tokens,
            latency_ms=completion.latency_ms,
            cost_usd=cost_text(completion.cost_usd),
            finish_reason=completion.finish_reason,
            recovered=recovered,
        )

    def _run_tools(self, workspace: Workspace, completion: Completion, step: Step) -> tuple[list[ToolResult], bool]:
        results: list[ToolResult] = []
        for call in completion.tool_calls:
            if call.malformed:
                self.trajectory.malformed_calls += 1
            outcome: ToolOutcome = workspace.run(call)
            results.append(ToolResult(call.id, outcome.content, outcome.is_error))
            step.results.append(
                {
                    "id": call.id,
                    "content": outcome.content,
                    "is_error": outcome.is_error,
                    "ms": outcome.ms,
                    "truncated": outcome.truncated,
                }
            )
            if outcome.submitted:
                return results, True  # calls after submit in the same turn are not run
        return results, False

    def answer(self, patch: str) -> Completion:
        """The attempt's answer: the working copy's diff, with every turn's figures summed."""
        totals, last = self.totals, self.last
        warnings = list(self.warnings)
        if self.trajectory.malformed_calls:
            count = self.trajectory.malformed_calls
            warnings.append(f"{count} malformed tool call(s) were shown to the model as errors")
        if self.trajectory.ended not in (Ended.SUBMITTED, ""):
            warnings.append(f"the agent did not submit ({self.trajectory.ended}): its working copy was taken as is")
        if any(step.recovered for step in self.trajectory.steps):
            warnings.append(answer_journal.RECOVERED)
        return Completion(
            text=patch,
            finish_reason=self.trajectory.ended,
            usage=totals.usage,
            latency_ms=totals.latency_ms,
            cost_usd=totals.cost if self.trajectory.steps else None,
            model_served=last.model_served if last else self.prepared.arm.model_name,
            request_id=last.request_id if last else "",
            retries=totals.retries,
            cost_source=last.cost_source if last and totals.cost is not None else "",
            raw_request={"solver": "agent", "turns": len(self.trajectory.steps)},
            raw_response={"ended": self.trajectory.ended, "turns": len(self.trajectory.steps)},
            warnings=tuple(warnings),
            wall_ms=totals.wall_ms,
            usage_reported=totals.usage_reported,
        )
