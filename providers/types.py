"""The normalised shapes every provider adapter speaks, whatever its wire format."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class ArmSpec:
    """What the gateway needs to know about one arm: plain values, no ORM objects."""

    provider: str
    model_name: str
    config: dict[str, Any] = field(default_factory=dict)
    # Identifies the arm across worker processes for its concurrency limit ("" = unlimited).
    key: str = ""
    # The name of the organisation's credential for this provider ("": its only one). The
    # endpoint comes from that credential, never from the arm.
    credential: str = ""


@dataclass(frozen=True)
class Tool:
    """A tool a model may call (an agent's): its name, what it does, and a JSON schema of
    its arguments (an object). Sent as OpenAI's ``tools`` or Anthropic's ``tools``."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model's turn, whatever the provider's format. ``arguments`` is the
    parsed JSON object; when the model sent something that is not one (broken JSON, a
    list), ``arguments`` is empty and ``malformed`` holds the text as sent, so the loop can
    show the model its mistake instead of running anything."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    malformed: str = ""


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gave back, as shown to the model (already capped)."""

    call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class Message:
    role: str  # "user" or "assistant"
    content: str
    # An assistant turn's tool calls (content may then be empty) ...
    tool_calls: tuple[ToolCall, ...] = ()
    # ... and the user turn that answers them, one result per call, in the calls' order
    # (OpenAI: ``role: tool`` messages; Anthropic: ``tool_result`` blocks), then ``content``
    # when there is any.
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class CompletionRequest:
    messages: tuple[Message, ...]
    system: str = ""
    max_output_tokens: int = 4096
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    # Stable per (run seed, task, arm, repetition): providers that accept a seed get it, and
    # the mock derives all of its choices from it, which makes runs reproducible. Nothing
    # else here tells a task's answer: the mock, like a model, reads the task in the messages.
    seed_key: str = ""
    # Structured output: the JSON schema the answer must follow, named. Sent as OpenAI's
    # response_format or as a forced Anthropic tool call; the answer's text is the JSON.
    response_schema: dict[str, Any] | None = None
    response_schema_name: str = "answer"
    # A replay arm's answer, read from the predictions file imported for it (None: the file
    # has no line for the task). Only the replay adapter reads it; no request carries it out.
    recorded_answer: str | None = None
    # The tools an agent's turn may call (empty: a plain completion). The answer then holds
    # the calls in ``Completion.tool_calls``.
    tools: tuple[Tool, ...] = ()
    # A task handed whole to an agent service (the http_agent provider); None for a model.
    agent_task: AgentTask | None = None
    # The same for every call made for one answer, across claims: a provider that documents
    # an idempotency key is sent it, so a call repeated after its worker died mid-call is
    # answered (and billed) once. Only our own http_agent protocol takes one today: OpenAI,
    # Azure OpenAI, OpenRouter and Anthropic document none (their SDKs send none either).
    idempotency_key: str = ""

    def prompt_text(self) -> str:
        parts = [self.system]
        for message in self.messages:
            parts += [result.content for result in message.tool_results]
            parts.append(message.content)
        return "\n".join(parts)


@dataclass(frozen=True)
class AgentTask:
    """What an agent service (the http_agent provider) is sent: the task, and the repository
    at its base commit, as a short-lived archive URL or as inline files."""

    task_id: str
    problem_statement: str
    repo: str = ""
    base_commit: str = ""
    archive_url: str = ""  # a tar.gz of the working tree, served by PRBench with a short-lived token
    files: dict[str, str] = field(default_factory=dict)  # inline, for small or self-contained tasks
    test_command: tuple[str, ...] = ()
    deadline_s: float = 0.0  # how long the service has to answer, from the request


@dataclass(frozen=True)
class Usage:
    """Token counts of one call. ``input_tokens`` is the whole prompt: cache reads
    (``cached_tokens``) and cache writes (``cache_write_tokens``) are parts of it, billed at
    their own prices. ``reasoning_tokens`` are part of ``output_tokens`` (OpenAI counts them
    in ``completion_tokens``, Anthropic's thinking in ``output_tokens``), billed at the output
    price unless the model prices them apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    # Part of ``cache_write_tokens``: Anthropic's 1-hour cache entries, dearer than 5-minute ones.
    cache_write_1h_tokens: int = 0


USAGE_FIELDS = tuple(f.name for f in fields(Usage))


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str
    usage: Usage
    latency_ms: int
    cost_usd: Decimal | None  # None means the price is unknown, never "free"
    model_served: str
    request_id: str = ""
    retries: int = 0
    retry_log: tuple[dict[str, Any], ...] = ()  # one entry per failed try that was retried
    cost_source: str = "provider"  # "provider" (reported by it), "catalog", or "" (unknown)
    # What the cost is made of, USD as strings, keyed by a label shown as is on the attempt
    # page ("input", "cache read", "cache write", "output", "reasoning"; OpenRouter: "OpenRouter",
    # or "OpenRouter fee" and "upstream" with a key of one's own); empty when unknown.
    cost_breakdown: dict[str, str] = field(default_factory=dict)
    raw_request: dict[str, Any] = field(default_factory=dict)
    raw_response: dict[str, Any] = field(default_factory=dict)
    # What the gateway had to correct in the provider's answer (a negative token count, say),
    # stored on the attempt so a reader knows which of its figures were not the provider's.
    warnings: tuple[str, ...] = ()
    # Timing of a streamed answer (None when not streamed or not measurable): from the start
    # of the successful try's request to its first content or thinking delta, and output
    # tokens per second after it. ``latency_ms`` is that try alone; ``wall_ms`` the whole
    # gateway call, failed tries, back-off and rate-limit or slot waits included.
    first_token_ms: int | None = None
    output_tokens_per_s: float | None = None
    wall_ms: int = 0
    # False when the provider sent no token counts (a stream from a server that ignores
    # ``stream_options.include_usage``): the zeros in ``usage`` are then not a count, and
    # the gateway prices nothing from them.
    usage_reported: bool = True
    # Read from another system's recorded predictions rather than generated now (a replay
    # arm): it took none of our time, so the attempt stores no timings a board could count.
    replayed: bool = False
    # The tools the model called in this turn (an agent's); empty for a plain answer.
    tool_calls: tuple[ToolCall, ...] = ()
