"""An agent attempt's steps, as stored (the TRAJECTORY artifact), shown and exported.

One step per model turn: what was sent that turn beyond the history (the first turn's task,
later turns' tool results), what the model answered (text and tool calls), what each tool
gave back as the model saw it (capped), and the turn's tokens, latency and cost. The history
is never stored twice: turn N's request is the first turn's messages plus every step before
it, which ``messages_before`` rebuilds. Stored as compact JSON, versioned.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from providers.types import Message, ToolCall, ToolResult

VERSION = 1


class Ended:
    """Why an agent's loop stopped. Only SUBMITTED is an answer the agent chose to give; the
    ceilings still validate whatever the working copy holds, as SWE-bench's agents do."""

    SUBMITTED = "submitted"
    MAX_TURNS = "max_turns"
    TOKEN_CEILING = "token_ceiling"
    COST_CEILING = "cost_ceiling"
    NO_TOOL_CALL = "no_tool_call"  # the model answered in prose: nothing more will happen
    INFRASTRUCTURE = "infrastructure"  # a turn failed for good on the provider's or our side


@dataclass
class Step:
    turn: int
    sent: list[dict[str, Any]]  # the messages this turn added to the history, as ``message_record``
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # as ``call_record``
    results: list[dict[str, Any]] = field(default_factory=list)  # {id, content, is_error, ms, truncated}
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: int = 0
    cost_usd: str | None = None  # a Decimal as text; None when unknown
    finish_reason: str = ""
    # Read back from the answer journal after a worker died mid-trajectory: not paid again.
    recovered: bool = False


@dataclass
class Trajectory:
    solver: str = "agent"
    prompt_version: str = ""
    system: str = ""
    steps: list[Step] = field(default_factory=list)
    ended: str = ""
    malformed_calls: int = 0
    version: int = VERSION

    @property
    def tool_call_count(self) -> int:
        return sum(len(step.tool_calls) for step in self.steps)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        data = json.loads(text)
        steps = [Step(**step) for step in data.pop("steps", [])]
        return cls(steps=steps, **data)

    def messages_before(self, turn: int) -> tuple[Message, ...]:
        """The history as sent in ``turn`` (1-based): every step's messages and answers before it."""
        messages: list[Message] = []
        for step in self.steps[: turn - 1]:
            messages += [message_from(record) for record in step.sent]
            calls = tuple(call_from(record) for record in step.tool_calls)
            messages.append(Message("assistant", step.text, tool_calls=calls))
        if turn - 1 < len(self.steps):
            messages += [message_from(record) for record in self.steps[turn - 1].sent]
        return tuple(messages)


def cost_text(cost: Decimal | None) -> str | None:
    return None if cost is None else str(cost)


def call_record(call: ToolCall) -> dict[str, Any]:
    record: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.malformed:
        record["malformed"] = call.malformed
    return record


def call_from(record: dict[str, Any]) -> ToolCall:
    return ToolCall(record["id"], record["name"], record.get("arguments", {}), record.get("malformed", ""))


def message_record(message: Message) -> dict[str, Any]:
    record: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        record["tool_calls"] = [call_record(call) for call in message.tool_calls]
    if message.tool_results:
        record["tool_results"] = [
            {"id": result.call_id, "content": result.content, "is_error": result.is_error}
            for result in message.tool_results
        ]
    return record


def message_from(record: dict[str, Any]) -> Message:
    return Message(
        record["role"],
        record.get("content", ""),
        tool_calls=tuple(call_from(call) for call in record.get("tool_calls", ())),
        tool_results=tuple(
            ToolResult(result["id"], result["content"], result.get("is_error", False))
            for result in record.get("tool_results", ())
        ),
    )
