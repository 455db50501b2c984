"""What every adapter does the same with a model's tool calls, whatever its wire format:
reading the arguments it sent into a ``ToolCall`` (or a malformed one), and naming a call a
server sent without an id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from providers.types import ToolCall


def parse_arguments(sent: Any) -> tuple[dict[str, Any], str]:
    """The arguments as a JSON object and ``""``, or ``{}`` and the text as sent when they are
    not one (broken JSON, a list, JSON cut by the token ceiling). Lenient where servers differ:
    an object already parsed (some OpenAI-compatible servers send one) is taken as is, and no
    arguments at all (``None``, ``""``: a call of a tool without parameters) is ``{}``."""
    if isinstance(sent, dict):
        return sent, ""
    if sent is None or (isinstance(sent, str) and not sent.strip()):
        return {}, ""
    if not isinstance(sent, str):
        return {}, json.dumps(sent)
    try:
        parsed = json.loads(sent)
    except ValueError:
        return {}, sent
    return (parsed, "") if isinstance(parsed, dict) else ({}, sent)


def tool_call(call_id: str, name: str, sent: Any, position: int) -> ToolCall:
    """One call as the model sent it; a call without an id (some compatible servers omit it)
    gets one made from what it is, so the same answer always names its calls alike."""
    arguments, malformed = parse_arguments(sent)
    return ToolCall(call_id or stable_call_id(position, name, sent), name, arguments, malformed)


def stable_call_id(position: int, name: str, sent: Any) -> str:
    text = sent if isinstance(sent, str) else json.dumps(sent, sort_keys=True)
    return "call_" + hashlib.sha256(f"{position}\0{name}\0{text}".encode()).hexdigest()[:24]


def arguments_as_sent(call: ToolCall) -> str:
    """A call's arguments as JSON text for the history sent back: a malformed call's own text,
    so the model sees what it wrote, not a repaired version it never sent."""
    return call.malformed or json.dumps(call.arguments, ensure_ascii=False)
