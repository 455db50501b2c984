"""Which settings an arm's ``config`` may hold, declared once per adapter.

Every key an adapter, the gateway or the request builder reads is declared with a check,
and nothing else is accepted: a typo (``qualty``) or a wrong type (``temperature: "hot"``)
is refused at save with the key named, by the web form, ``apply_experiment`` and the API
alike, because all of them ask ``config_errors``. Adding a setting is one line in the
adapter's ``config_keys``: a ``Setting``, which is the check (call it with a value) and also
says how the experiment form asks for the value (its kind, bounds or choices, label, help).

Where a request goes, and with which identity, belongs to the credential an owner set up,
never to an arm: an arm that could choose the URL could send the organisation's key to its
own server. Those keys get their own refusal, and ``runtime_config`` drops every key that
is not declared, so one written straight into an old row is ignored by the gateway.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

# Returns what is wrong with a value ("must be ..."), or None when it is fine.
Check = Callable[[Any], str | None]

# Anything an SDK client would use to choose where, or as whom, a request is sent.
ROUTING_KEYS = frozenset(
    {
        "base_url",
        "api_base",
        "base",
        "url",
        "host",
        "endpoint",
        "azure_endpoint",
        "api_version",
        "deployment",
        "deployment_name",
        "azure_deployment",
        "deployments",
        "organization",
        "project",
        "api_key",
        "azure_ad_token",
        "azure_ad_token_provider",
        "auth_token",
        "default_headers",
        "extra_headers",
        "headers",
        "default_query",
        "extra_query",
        "proxy",
        "proxies",
        "http_client",
        "websocket_base_url",
        "credential",
    }
)
# Body fields an arm may not set through ``extra_body``: the model is the arm's (and the
# allowlist checks it); ``models``/``route`` are OpenRouter's fallbacks to other models.
RESERVED_BODY_KEYS = frozenset({"model", "models", "route", "stream", "messages"})

# Body fields that change what a call can cost past what a budget reserves for it (the
# prompt and one answer of the arm's max_tokens, at the catalog's token prices), on any
# provider: refused in ``extra_body`` at any depth, since what a vendor reads there is its
# own affair. Output length and reasoning are the arm's own settings (max_tokens,
# reasoning_effort, thinking_budget_tokens), which the adapters send within max_tokens.
COMPLETION_COUNT_KEYS = frozenset(
    {"n", "best_of", "num_completions", "num_return_sequences", "num_generations", "candidate_count", "num_beams"}
)
COST_BODY_KEYS = COMPLETION_COUNT_KEYS | {
    "candidateCount",
    "use_beam_search",
    # Token ceilings the pattern below does not catch (Ollama's, Hugging Face's).
    "num_predict",
    "max_length",
    # Reasoning: OpenAI's, OpenRouter's, Anthropic's, Gemini's (through its OpenAI endpoint).
    "reasoning",
    "reasoning_effort",
    "include_reasoning",
    "thinking",
    "thinking_config",
    "thinkingConfig",
    "thinking_budget",
    "thinkingBudget",
    "budget_tokens",
    # Billed beyond tokens (tool and search calls, containers), or tokens at another rate
    # (a priority tier, audio, rejected predictions, a fast or region-pinned model).
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "web_search_options",
    "plugins",
    "mcp_servers",
    "container",
    "data_sources",
    "search_parameters",
    "service_tier",
    "prediction",
    "audio",
    "modalities",
    "speed",
    "inference_geo",
}
# Any vendor's token ceiling or floor: max_tokens, max_completion_tokens, max_output_tokens,
# maxOutputTokens, max_new_tokens, min_tokens, max_tokens_to_sample …
TOKEN_LIMIT_KEY = re.compile(r"^(max|min)_?\w*tokens", re.IGNORECASE)
# Fields whose values are the arm's own data, not the vendor's settings: a JSON schema may
# name a property "n" or "tools" without asking for anything.
DATA_BODY_KEYS = frozenset({"response_format", "metadata"})


def cost_fields(body: Mapping, prefix: str = "") -> list[str]:
    """The fields of ``body``, at any depth, that change what a call can cost, as dotted paths."""
    found = []
    for key, value in body.items():
        path = f"{prefix}{key}"
        if key in COST_BODY_KEYS or TOKEN_LIMIT_KEY.match(str(key)):
            found.append(path)
        elif isinstance(value, Mapping) and key not in DATA_BODY_KEYS:
            found += cost_fields(value, f"{path}.")
    return found


COST_REFUSAL = (
    "(each changes what a call can cost past what a budget can hold it to: output length and reasoning "
    "are the arm's own settings, and tools, search and other tiers are not priced)"
)


class UnboundedCost(ValueError):
    """A request body as it would be sent has no bound on what it can cost."""


def billed_output_tokens(body: Mapping) -> int:
    """The most output tokens a provider can bill for this request body as it is sent: every
    answer it asks for (``n``, ``best_of`` …) up to its largest token ceiling. Read from the
    final body, so whatever put a field there (the arm's settings, the adapter, a setting
    added later), the budget reserves for it. Raises ``UnboundedCost`` naming the field when a
    ceiling is missing or a count is not one."""
    ceilings = {key: value for key, value in body.items() if TOKEN_LIMIT_KEY.match(key) and key[:3].lower() == "max"}
    if not ceilings:
        raise UnboundedCost("the request sets no output token ceiling")
    counts = {key: value for key, value in body.items() if key in COMPLETION_COUNT_KEYS}
    for key, value in (ceilings | counts).items():
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise UnboundedCost(f"the request's {key} is {value!r}, not a positive whole number")
    return max(ceilings.values()) * max(counts.values(), default=1)


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One declared arm setting. Called with a value it is the check: what is wrong with the
    value ("must be ..."), or None. Read, it says how a form asks for it: its ``kind`` (the
    input), its bounds or choices, a label and help. The experiment form builds its typed
    fields from these, and still judges every value by calling the setting: one rule."""

    kind: ClassVar[str]
    # A template reads a setting's attributes; calling it there would ask for a value.
    do_not_call_in_templates: ClassVar[bool] = True
    label: str = ""
    help: str = ""

    def __call__(self, value: Any) -> str | None:
        raise NotImplementedError

    def values_in_words(self) -> str:
        """What it takes, for the form's help ("0 to 2"); empty when the input says it."""
        return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class Number(Setting):
    kind = "number"
    low: float
    high: float

    def __call__(self, value: Any) -> str | None:
        ok = _is_number(value) and self.low <= value <= self.high
        return None if ok else f"must be a number between {self.low} and {self.high}"

    def values_in_words(self) -> str:
        return f"{self.low:g} to {self.high:g}"


@dataclass(frozen=True, kw_only=True)
class Integer(Setting):
    kind = "integer"
    low: int
    high: int

    def __call__(self, value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high
        return None if ok else f"must be a whole number between {self.low} and {self.high}"

    def values_in_words(self) -> str:
        return f"a whole number, {self.low:,} to {self.high:,}" if self.high < 2**31 else f"at least {self.low}"


@dataclass(frozen=True, kw_only=True)
class Seconds(Setting):
    kind = "seconds"
    high: float = 86_400

    def __call__(self, value: Any) -> str | None:
        ok = _is_number(value) and 0 < value <= self.high
        return None if ok else f"must be a positive number of seconds, at most {self.high:g}"

    def values_in_words(self) -> str:
        return f"seconds, more than 0, at most {self.high:g}"


@dataclass(frozen=True, kw_only=True)
class Boolean(Setting):
    kind = "boolean"
    # What the adapter does when the arm does not say: a form's unticked box is only a
    # setting when it differs from this.
    default: bool

    def __call__(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else "must be true or false"

    def values_in_words(self) -> str:
        return f"{'on' if self.default else 'off'} unless set"


@dataclass(frozen=True, kw_only=True)
class Choice(Setting):
    kind = "choice"
    values: tuple[str, ...]

    def __call__(self, value: Any) -> str | None:
        return None if value in self.values else f"must be one of {', '.join(self.values)}"


@dataclass(frozen=True, kw_only=True)
class BodyFields(Setting):
    """``extra_body`` only adds JSON fields to the request body; it may not replace the
    model, carry anything that looks like routing, or change what a call can cost."""

    kind = "object"  # no input of its own: a form takes it as JSON

    def __call__(self, value: Any) -> str | None:
        if not isinstance(value, dict):
            return "must be an object"
        problems = []
        refused = sorted(k for k in value if k in RESERVED_BODY_KEYS or k in ROUTING_KEYS)
        if refused:
            routing = "(the model and the endpoint are not the arm's to change)"
            problems.append(f"may not set {', '.join(refused)} {routing}")
        if priced := sorted(cost_fields(value)):
            problems.append(f"may not set {', '.join(priced)} {COST_REFUSAL}")
        return "; ".join(problems) or None

    def values_in_words(self) -> str:
        return "a JSON object"


def number(low: float, high: float, *, label: str = "", help: str = "") -> Number:
    return Number(low=low, high=high, label=label, help=help)


def integer(low: int, high: int, *, label: str = "", help: str = "") -> Integer:
    return Integer(low=low, high=high, label=label, help=help)


def positive_seconds(high: float = 86_400, *, label: str = "", help: str = "") -> Seconds:
    return Seconds(high=high, label=label, help=help)


def boolean(*, default: bool, label: str = "", help: str = "") -> Boolean:
    return Boolean(default=default, label=label, help=help)


def choice(*values: str, label: str = "", help: str = "") -> Choice:
    return Choice(values=values, label=label, help=help)


body_fields = BodyFields(
    label="Extra body fields",
    help="JSON fields added to the request body as they are (a vendor's own parameters); not ones that change "
    "what a call can cost (n, token limits, reasoning, tools, service tier)",
)


def label_of(name: str, setting: Setting) -> str:
    """The declared label, else the key in words ("max_tokens": "Max tokens")."""
    return setting.label or name.replace("_", " ").capitalize()


# Read for every provider: the gateway's retry and concurrency settings, and the request
# builder's sampling settings (experiments/prompts.py).
COMMON_KEYS: dict[str, Setting] = {
    "max_retries": integer(0, 20, label="Retries", help="Tries after the first when the provider fails transiently"),
    "retry_base_ms": number(
        0,
        600_000,
        label="Retry wait (ms)",
        help="The wait before the first retry when the provider names none; it doubles per retry, up to 8 s",
    ),
    "retry_deadline_s": number(
        0.001, 86_400, label="Retry deadline (s)", help="The whole call, every try and wait included"
    ),
    "timeout_total_s": number(
        0.001, 86_400, label="Total timeout (s)", help="The whole call; never more than the retry deadline"
    ),
    "max_concurrency": integer(1, 1024, label="Concurrent calls", help="At most this many of the arm's calls at once"),
    "max_tokens": integer(1, 1_000_000, label="Max output tokens", help="The longest answer the model may give"),
    "temperature": number(0, 2, label="Temperature", help="Sampling temperature; 0 is the most repeatable"),
    "top_p": number(0, 1, label="Top p", help="Nucleus sampling"),
}
# How an arm writes its answer: asked once (``single_turn``, the default), or as an agent in
# a loop with tools in the task's sandbox (experiments/agent.py). The agent's settings are
# read by the loop, never sent to a provider, and refused on a single-turn arm (the check is
# ``solver_errors``), so a typo cannot make an arm look like an agent that is not one.
SOLVERS = ("single_turn", "agent")
# Named tool sets (evaluation/agent_tools.py holds the tools): "all", or all but the tests.
TOOL_SETS = ("all", "no_tests")
# The agent's system prompts, versioned like the run's templates (experiments/agent.py).
AGENT_PROMPTS = ("agent-v1",)
AGENT_KEYS: dict[str, Setting] = {
    "max_turns": integer(1, 500, label="Max turns", help="Agent: model turns before the attempt ends unsubmitted"),
    "max_output_tokens_per_turn": integer(
        1, 1_000_000, label="Max output tokens per turn", help="Agent: the longest answer of one turn"
    ),
    "max_attempt_tokens": integer(
        1, 1_000_000_000, label="Token ceiling per attempt", help="Agent: input and output tokens of all turns"
    ),
    "max_attempt_cost_usd": number(0.000001, 100_000, label="Cost ceiling per attempt ($)", help="Agent: all turns"),
    "tools": choice(*TOOL_SETS, label="Tools", help="Agent: every tool, or every tool but running the tests"),
    "agent_prompt": choice(*AGENT_PROMPTS, label="Agent prompt", help="Agent: the versioned system prompt"),
    "tool_output_chars": integer(
        200, 200_000, label="Tool output cap (chars)", help="Agent: a tool's output past this is cut, and says so"
    ),
}
SOLVER_KEYS: dict[str, Setting] = {
    "solver": choice(*SOLVERS, label="Solver", help="single_turn asks once; agent works in a loop with tools"),
    **AGENT_KEYS,
}
COMMON_KEYS |= SOLVER_KEYS


def solver_of(config: Mapping) -> str:
    return config.get("solver") or "single_turn"


def solver_label(label: str, solver: str | None) -> str:
    """An arm's label as boards, verdicts and pages name it: an agent arm says so, so a model
    asked once and the same model as an agent are told apart whatever their labels say."""
    return f"{label} (agent)" if solver == "agent" else label


def solver_errors(config: Mapping, agent_allowed: bool = True, provider: str = "") -> list[str]:
    """An agent's settings on an arm that is not an agent, or an agent on a provider that
    cannot be one (a replay, a team's own agent service), each named."""
    if solver_of(config) == "agent":
        if not agent_allowed:
            return [f"config.solver: a {provider} arm answers by itself and cannot be run as an agent"]
        return []
    return [
        f"config.{name} is an agent setting: set config.solver to agent, or leave it out"
        for name in sorted(AGENT_KEYS)
        if name in config
    ]


# OpenAI's ReasoningEffort enum (the OpenAPI document in shared/specs); not every reasoning
# model takes every value, and the provider says which in its 400.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# Anthropic's floor for an extended-thinking budget.
THINKING_BUDGET_MIN = 1024

# Read by every adapter that speaks HTTP (providers/adapters/timeouts.py).
HTTP_KEYS: dict[str, Setting] = {
    "timeout_connect_s": positive_seconds(label="Connect timeout (s)"),
    "timeout_read_s": positive_seconds(label="Read timeout (s)", help="The longest wait for the next bytes"),
    "extra_body": body_fields,
    # Stream the answer (SSE), for time to first token and output speed; off for a server
    # that cannot stream.
    "stream": boolean(
        default=True, label="Stream the answer", help="Measures time to first token; untick for a server that cannot"
    ),
}


# Settings that change how a call is made, never what it answers: the gateway's retry,
# deadline and concurrency, the HTTP timeouts, and the mock's simulated delay. The response
# cache (providers/response_cache.py) leaves them out of its key, so raising a timeout does
# not throw away every stored answer; every other declared key is part of it.
OPERATIONAL_KEYS = frozenset(
    {
        "max_retries",
        "retry_base_ms",
        "retry_deadline_s",
        "timeout_total_s",
        "max_concurrency",
        "timeout_connect_s",
        "timeout_read_s",
        "latency_ms",
        "jitter_ms",
        "stream",  # how the answer travels (SSE or one body), not what it says
        "deadline_s",  # an agent service's time to answer, a timeout like the others
    }
)


def answer_config(config: dict) -> dict:
    """The settings that shape the answer: the config without its operational keys."""
    return {name: value for name, value in config.items() if name not in OPERATIONAL_KEYS}


def config_key_errors(provider: str, keys: Mapping[str, Setting], config: dict) -> list[str]:
    """Every routing, unknown or ill-typed key, each named, in a stable order."""
    errors = []
    for name in sorted(config, key=str):
        if name in ROUTING_KEYS:
            errors.append(
                f"config.{name} is not an arm setting: where requests go, and with which identity, belongs "
                "to the credential an owner or admin set up; choose one by name with `credential`"
            )
        elif name not in keys:
            errors.append(f"config.{name} is not a {provider} setting (known: {', '.join(sorted(keys))})")
        else:
            problem = keys[name](config[name])
            if problem:
                errors.append(f"config.{name} {problem}")
    return errors


def runtime_config(keys: Mapping[str, Setting], config: dict) -> dict:
    """The config the gateway hands an adapter: declared, well-formed keys only, whatever
    an old row (written before these checks, or straight into the database) holds."""
    return {name: value for name, value in config.items() if name in keys and keys[name](value) is None}


def unsent_warnings(unsent: dict[str, str]) -> tuple[str, ...]:
    """What an adapter did not send of the request or the arm (``unsent_settings``), as the
    attempt's warnings: a setting is never dropped silently."""
    return tuple(f"{name} was not sent: {why}" for name, why in unsent.items())
