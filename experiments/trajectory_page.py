"""An agent attempt's trajectory as its page shows it: step by step, the model's text, each
tool call (its name and arguments, or the text it sent when that was not a call) with what
the tool gave back, and the turn's tokens, latency and cost; why the loop ended, and which
turns were read back after a restart rather than paid again.

A tool's output is capped when the agent runs (its arm's ``tool_output_chars``), yet a page of
fifty turns of long outputs is still too much to send at once: an output past
``INLINE_OUTPUT_CHARS`` shows its first lines, and the whole of it is one request away
(``tool_output``, through the attempt's access check like the page itself).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from experiments.models import Artifact, ArtifactKind, Attempt
from experiments.trajectory import Ended, Step, Trajectory

# An output longer than this is not sent with the page: its first lines, then a link to the rest.
INLINE_OUTPUT_CHARS = 4000
PREVIEW_LINES = 12

ENDED_WORDS = {
    Ended.SUBMITTED: "The agent submitted its answer.",
    Ended.MAX_TURNS: "It reached its turn ceiling without submitting; the working copy was validated as it was.",
    Ended.TOKEN_CEILING: "It reached its token ceiling without submitting; the working copy was validated as it was.",
    Ended.COST_CEILING: "It reached its cost ceiling without submitting; the working copy was validated as it was.",
    Ended.NO_TOOL_CALL: "The model answered in prose, calling no tool: nothing more would have happened.",
    Ended.INFRASTRUCTURE: "A turn failed for good on the provider's or the platform's side: not the model's doing.",
}


@dataclass(frozen=True)
class ToolOutput:
    """What one tool call gave back, as the model saw it."""

    content: str
    is_error: bool = False
    ms: int | None = None
    truncated: bool = False  # cut at the arm's tool output cap, as the model was told

    @property
    def inline(self) -> bool:
        return len(self.content) <= INLINE_OUTPUT_CHARS

    @property
    def preview(self) -> str:
        return "\n".join(self.content.splitlines()[:PREVIEW_LINES])

    @property
    def size(self) -> str:
        lines = self.content.count("\n") + 1
        return f"{len(self.content):,} character{'s' * (len(self.content) != 1)}, {lines:,} line{'s' * (lines != 1)}"


@dataclass(frozen=True)
class ShownCall:
    number: int  # 1-based within its turn: the address of its output
    name: str
    arguments: str  # pretty JSON, or "" for a malformed call
    malformed: str  # the text the model sent when it was not a call; "" for a well-formed one
    output: ToolOutput | None  # None: no result recorded (the loop ended at this call)


@dataclass(frozen=True)
class ShownStep:
    turn: int
    text: str
    calls: list[ShownCall]
    task: str  # the first turn's messages as sent (the task); "" on later turns, whose news is the outputs
    input_tokens: int
    output_tokens: int
    latency_ms: int
    cost_usd: Decimal | None
    finish_reason: str
    recovered: bool


@dataclass(frozen=True)
class ShownTrajectory:
    steps: list[ShownStep]
    ended: str
    ended_words: str
    malformed_calls: int
    tool_calls: int
    prompt_version: str
    system: str

    @property
    def recovered_turns(self) -> list[int]:
        return [step.turn for step in self.steps if step.recovered]


def read_trajectory(artifact: Artifact | None) -> Trajectory | None:
    """The stored trajectory, or None when there is none or it cannot be read (a format this
    code does not know must not break the attempt's page)."""
    if artifact is None or not artifact.content:
        return None
    try:
        return Trajectory.from_json(artifact.content)
    except (ValueError, TypeError, KeyError):
        return None


def trajectory_fields(content: str | None) -> dict[str, Any] | None:
    """A TRAJECTORY artifact's text as parsed JSON (the API's and exports' form); None without
    one, or for a text that is not a JSON object."""
    if not content:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def attempt_trajectory(artifact: Artifact | None) -> ShownTrajectory | None:
    """The page's trajectory from the attempt's TRAJECTORY artifact; None for a single-turn
    attempt (or one whose trajectory cannot be read)."""
    trajectory = read_trajectory(artifact)
    return shown_trajectory(trajectory) if trajectory else None


def shown_trajectory(trajectory: Trajectory) -> ShownTrajectory:
    return ShownTrajectory(
        steps=[_shown_step(step) for step in trajectory.steps],
        ended=trajectory.ended,
        ended_words=ENDED_WORDS.get(trajectory.ended, trajectory.ended and f"It ended: {trajectory.ended}."),
        malformed_calls=trajectory.malformed_calls,
        tool_calls=trajectory.tool_call_count,
        prompt_version=trajectory.prompt_version,
        system=trajectory.system,
    )


def _shown_step(step: Step) -> ShownStep:
    outputs = {str(result.get("id")): result for result in step.results if isinstance(result, dict)}
    return ShownStep(
        turn=step.turn,
        text=step.text,
        calls=[_shown_call(number, call, outputs) for number, call in enumerate(step.tool_calls, 1)],
        task="\n\n".join(str(m.get("content", "")) for m in step.sent if m.get("content")) if step.turn == 1 else "",
        input_tokens=step.input_tokens,
        output_tokens=step.output_tokens,
        latency_ms=step.latency_ms,
        cost_usd=_decimal(step.cost_usd),
        finish_reason=step.finish_reason,
        recovered=step.recovered,
    )


def _shown_call(number: int, call: dict[str, Any], outputs: dict[str, dict[str, Any]]) -> ShownCall:
    malformed = str(call.get("malformed") or "")
    arguments = call.get("arguments") or {}
    result = outputs.get(str(call.get("id")))
    return ShownCall(
        number=number,
        name=str(call.get("name", "")),
        arguments="" if malformed else json.dumps(arguments, indent=2, ensure_ascii=False),
        malformed=malformed,
        output=_output(result) if result is not None else None,
    )


def _output(result: dict[str, Any]) -> ToolOutput:
    ms = result.get("ms")
    return ToolOutput(
        content=str(result.get("content", "")),
        is_error=bool(result.get("is_error")),
        ms=ms if isinstance(ms, int) else None,
        truncated=bool(result.get("truncated")),
    )


def _decimal(text: str | None) -> Decimal | None:
    try:
        return None if text is None else Decimal(text)
    except InvalidOperation:
        return None


def tool_output(attempt: Attempt, turn: int, number: int) -> ToolOutput | None:
    """The output of the ``number``-th call of ``turn``; None when there is no such call."""
    shown = attempt_trajectory(attempt.artifacts.filter(kind=ArtifactKind.TRAJECTORY).first())
    step = next((step for step in shown.steps if step.turn == turn), None) if shown else None
    if step is None or not 1 <= number <= len(step.calls):
        return None
    return step.calls[number - 1].output
