"""OpenAI Chat Completions and everything that speaks its wire format: OpenAI itself,
Azure OpenAI, OpenRouter and self-hosted OpenAI-compatible servers (vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from functools import lru_cache
from typing import Any, ClassVar

import openai
from openai.types.chat import ChatCompletion

from providers.adapters.base import Adapter
from providers.adapters.config import (
    COMMON_KEYS,
    HTTP_KEYS,
    REASONING_EFFORTS,
    billed_output_tokens,
    boolean,
    choice,
    unsent_warnings,
)
from providers.adapters.http_errors import failure, translate_sdk_error
from providers.adapters.streaming import (
    StreamClock,
    cut_error,
    provider_http_client,
    read_response,
    rehearsal_client,
    tokens_per_second,
)
from providers.adapters.timeouts import timeout_key, timeouts_from_key, try_timeout
from providers.adapters.tool_calls import arguments_as_sent, tool_call
from providers.errors import ErrorCategory, ProviderError
from providers.types import Completion, CompletionRequest, Message, Tool, ToolCall, ToolResult, Usage

OPENROUTER_URL = "https://openrouter.ai/api/v1"
OPENROUTER_HEADERS = {"HTTP-Referer": "https://prbench.dev", "X-Title": "PRBench"}

# OpenAI's reasoning families: o1, o3, o4-mini, gpt-5 and later gpt-5.x. Their chat-tuned
# variants (gpt-5-chat-latest) are not reasoning models and take sampling settings.
REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# What reasoning models refuse with "Unsupported parameter" (a 400), so it is never sent.
REASONING_REJECTS = ("temperature", "top_p", "stop")
# Every OpenAI chat family's ids start so (gpt-4o, gpt-4.1, gpt-5.1, o3-mini ...).
OPENAI_FAMILY_PREFIXES = ("gpt-", *REASONING_PREFIXES)
# Except these, which gpt-5.1 and later take with reasoning_effort "none" (OpenAI's "Using
# GPT-5.x" guide: sampling parameters only then; any other effort, or gpt-5 itself, refuses them).
SAMPLING = ("temperature", "top_p")
LATER_GPT5 = re.compile(r"gpt-5\.(\d+)")


def _openai_id(model_name: str) -> str:
    return model_name.strip().lower().removeprefix("openai/")  # OpenRouter's vendor prefix


def is_reasoning_model(model_name: str) -> bool:
    """The one rule for which OpenAI models reason: the id (an OpenRouter ``openai/`` vendor
    prefix stripped) starts with o1, o3, o4 or gpt-5 and is not a ``-chat`` variant."""
    model = _openai_id(model_name)
    return model.startswith(REASONING_PREFIXES) and "-chat" not in model


def samples_without_reasoning(model_name: str) -> bool:
    """gpt-5.1 and later (gpt-5.1, gpt-5.2-pro, gpt-5.1-2025-11-13 …): with reasoning_effort
    none they take temperature and top_p."""
    later = LATER_GPT5.match(_openai_id(model_name))
    return later is not None and int(later.group(1)) >= 1


class OpenAIChatAdapter(Adapter):
    name = "openai"
    needs_credential = True
    default_base_url: ClassVar[str | None] = None
    test_model = "gpt-4.1-mini"
    # OpenAI deprecated max_tokens and its reasoning models refuse it; it counts reasoning
    # tokens too, so it bounds the whole bill.
    token_limit_field: ClassVar[str] = "max_completion_tokens"
    # Whether arm model names are OpenAI's ids, so reasoning_effort can be checked at save.
    model_ids_are_openais: ClassVar[bool] = True
    # Why the attempt's seed is not sent, or "" where the API still documents it. OpenAI's
    # OpenAPI document marks chat completions' seed deprecated (Beta, "deprecated: true").
    seed_not_sent: ClassVar[str] = "OpenAI's API marks seed deprecated for chat completions"
    config_keys = (
        COMMON_KEYS
        | HTTP_KEYS
        | {
            "send_seed": boolean(
                default=True, label="Send the seed", help="Ask for repeatable sampling with the attempt's seed"
            ),
            "structured_output": boolean(
                default=True,
                label="Structured output",
                help="Send a request's JSON schema (the judge's) as response_format; untick for a server without it",
            ),
            "reasoning_effort": choice(
                *REASONING_EFFORTS, label="Reasoning effort", help="Reasoning models only (o1, o3, o4, gpt-5)"
            ),
        }
    )

    @classmethod
    def config_errors(cls, model_name: str, config: dict) -> list[str]:
        errors = super().config_errors(model_name, config)
        if "reasoning_effort" in config and cls.names_openai_model(model_name) and not is_reasoning_model(model_name):
            errors.append(
                f"config.reasoning_effort applies to reasoning models only (o1, o3, o4, gpt-5), not {model_name}"
            )
        return errors

    @classmethod
    def names_openai_model(cls, model_name: str) -> bool:
        """Whether the arm's model name is one of OpenAI's ids, so its family is known at save."""
        return cls.model_ids_are_openais

    def client(self) -> openai.OpenAI:
        credential = self.credential
        return _openai_client(
            credential.api_key if credential else "",
            (credential.base_url if credential and credential.base_url else None) or self.default_base_url,
            timeout_key(self.arm.config),
            tuple(sorted(self.extra_headers().items())),
        )

    def extra_headers(self) -> dict[str, str]:
        return {}

    def model_for_request(self) -> str:
        return self.arm.model_name

    def token_limit(self) -> str:
        return self.token_limit_field

    def extra_body(self) -> dict[str, Any]:
        return dict(self.arm.config.get("extra_body", {}))

    def reasoning_params(self, effort: str) -> dict[str, Any]:
        return {"reasoning_effort": effort}

    def params(self, request: CompletionRequest) -> dict[str, Any]:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        for message in request.messages:
            messages += openai_messages(message)
        params: dict[str, Any] = {
            "model": self.model_for_request(),
            "messages": messages,
            self.token_limit(): request.max_output_tokens,
        }
        if request.tools:  # no tool_choice: "auto", the default, lets the model answer or call
            params["tools"] = [openai_tool(tool) for tool in request.tools]
        unsent = self.unsent_settings(request)
        optional = {"temperature": request.temperature, "top_p": request.top_p, "stop": list(request.stop) or None}
        params |= {k: v for k, v in optional.items() if v is not None and k not in unsent}
        if "reasoning_effort" in self.arm.config:
            params |= self.reasoning_params(self.arm.config["reasoning_effort"])
        if request.seed_key and self.arm.config.get("send_seed", True) and not self.seed_not_sent:
            params["seed"] = _stable_seed(request.seed_key)
        if request.response_schema and self.arm.config.get("structured_output", True):
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.response_schema_name,
                    "schema": request.response_schema,
                    "strict": True,
                },
            }
        if self.arm.config.get("stream", True):
            # Without include_usage a stream carries no token counts at all.
            params |= {"stream": True, "stream_options": {"include_usage": True}}
        return params

    def unsent_settings(self, request: CompletionRequest) -> dict[str, str]:
        """Each setting of the request or the arm that is not sent, with why: the model would
        refuse it with a 400, or the API no longer documents it. The one place that decides;
        ``params`` leaves them out and ``generate`` names them on the attempt as warnings."""
        # The model that answers (an Azure deployment's served model), not the arm's name for it.
        model = self.served_model(self.arm.model_name, self.credential.deployments if self.credential else {})
        effort = self.arm.config.get("reasoning_effort")
        asked = {"temperature": request.temperature, "top_p": request.top_p, "stop": request.stop or None}
        unsent = {}
        for name in REASONING_REJECTS if is_reasoning_model(model) else ():
            if asked[name] is None:
                continue
            if name not in SAMPLING or not samples_without_reasoning(model):
                unsent[name] = f"{model} is a reasoning model and refuses it"
            elif effort != "none":
                unsent[name] = f"{model} takes it only with reasoning_effort none"
        if self.seed_not_sent and request.seed_key and self.arm.config.get("send_seed") is True:
            unsent["seed"] = f"{self.seed_not_sent}, so send_seed has no effect"
        return unsent

    def sent_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The JSON body as the SDK sends it: ``extra_body`` merged over the arguments."""
        return self.params(request) | self.extra_body()

    def billed_output_tokens(self, request: CompletionRequest) -> int:
        return billed_output_tokens(self.sent_body(request))

    def warm(self) -> None:
        _rehearse_once()
        self.sdk_create()

    def sdk_create(self) -> Any:
        """The SDK's create method on the (cached) client: the client, and the SDK modules its
        first use imports, are built here, before any try's clock starts."""
        return self.client().chat.completions.with_raw_response.create

    def generate(self, request: CompletionRequest) -> Completion:
        params = self.params(request)
        try:
            create = self.sdk_create()
            clock = StreamClock()
            raw = create(
                **params,
                extra_body=self.extra_body() or None,
                timeout=try_timeout(self.arm.config, self.seconds_left()),
            )
            streaming = bool(params.get("stream"))
            response, streamed = read_response(raw, streaming, self.deadline, clock, read_openai_stream, ChatCompletion)
        except Exception as exc:
            error = translate_sdk_error(exc, openai, params)
            if error is None:
                raise
            raise error from None
        latency_ms = clock.elapsed_ms()
        body = _as_dict(response)
        if streamed and not body.get("choices"):
            raise cut_error(params)  # no finish_reason: the connection closed mid-answer
        choices = body.get("choices") or []
        if not choices:
            raise failure(ErrorCategory.SERVER_ERROR, "the response had no choices", params)
        choice = choices[0]
        if choice.get("finish_reason") == "content_filter":
            raise failure(ErrorCategory.CONTENT_FILTERED, "the answer was withheld by a content filter", params)
        usage = body.get("usage") or {}
        cost_usd, cost_breakdown = self.reported_cost(usage)
        counts = openai_usage(usage)
        unreported = streamed and not usage
        first_token_ms = clock.first_token_ms() if streamed else None
        message = choice.get("message") or {}
        return Completion(
            text=message.get("content") or "",
            tool_calls=tool_calls_of(message),
            finish_reason=choice.get("finish_reason") or "",
            usage=counts,
            latency_ms=latency_ms,
            first_token_ms=first_token_ms,
            output_tokens_per_s=tokens_per_second(counts.output_tokens, latency_ms, first_token_ms),
            cost_usd=cost_usd,
            cost_breakdown=cost_breakdown,
            model_served=body.get("model") or self.arm.model_name,
            request_id=raw.headers.get("x-request-id", "") or body.get("id", ""),
            raw_request=params,
            raw_response=body,
            usage_reported=not unreported,
            warnings=(*unsent_warnings(self.unsent_settings(request)), *((NO_STREAM_USAGE,) if unreported else ())),
        )

    def reported_cost(self, usage: dict) -> tuple[Decimal | None, dict[str, str]]:
        return None, {}  # priced from the catalog by the gateway


NO_STREAM_USAGE = (
    "the stream carried no token counts (the server ignores stream_options.include_usage): "
    "tokens stored as 0, cost unknown"
)
# Where a chunk's delta carries generated tokens: the answer, a refusal, and the reasoning
# text OpenRouter (``reasoning``) and vLLM (``reasoning_content``) stream before it.
TOKEN_FIELDS = ("content", "refusal", "reasoning", "reasoning_content")
HEAD_FIELDS = ("id", "created", "model", "system_fingerprint")


def read_openai_stream(stream: Any, clock: StreamClock) -> dict:
    """The chunks of a chat.completion.chunk stream assembled into the body the same request
    would have had unstreamed (first choice only: PRBench never asks for more than one).

    Without a ``finish_reason`` the stream was cut and there is no choice at all, so a
    truncated answer is never mistaken for a whole one."""
    # Azure's first chunk carries only prompt_filter_results, with an empty id and model.
    head: dict = {}
    parts: dict[str, list[str]] = {"content": [], "refusal": []}
    calls: dict[int, dict] = {}
    finish_reason, usage = None, None
    for chunk in stream:
        data = _as_dict(chunk)
        head |= {key: data[key] for key in HEAD_FIELDS if data.get(key) and key not in head}
        usage = data.get("usage") or usage  # the final chunk's, with empty choices
        for chunk_choice in data.get("choices") or []:
            if chunk_choice.get("index", 0) != 0:
                continue
            delta = chunk_choice.get("delta") or {}
            if any(delta.get(name) for name in (*TOKEN_FIELDS, "tool_calls")):
                clock.token()
            for name, seen in parts.items():
                seen.append(delta.get(name) or "")
            for fragment in delta.get("tool_calls") or []:
                _add_tool_call_fragment(calls, fragment)
            finish_reason = chunk_choice.get("finish_reason") or finish_reason
    message: dict[str, Any] = {"role": "assistant"}
    message |= {name: "".join(seen) for name, seen in parts.items() if any(seen)}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    body = head | {"object": "chat.completion", "choices": []}
    if finish_reason:
        body["choices"] = [{"index": 0, "message": message, "finish_reason": finish_reason}]
    return body | ({"usage": usage} if usage else {})


def _add_tool_call_fragment(calls: dict[int, dict], fragment: dict) -> None:
    """One ``delta.tool_calls`` item (ChatCompletionMessageToolCallChunk) added to the call at
    its ``index``: the id, type and name come in a call's first fragment, its arguments text in
    pieces over many chunks, and several calls' fragments may interleave. A server that sends
    no index (not OpenAI's) starts a call with each new id and continues the last one otherwise."""
    index = fragment.get("index")
    if not isinstance(index, int):
        index = _index_without_one(calls, fragment.get("id") or "")
    call = calls.setdefault(index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
    call["id"] = call["id"] or fragment.get("id") or ""
    function = fragment.get("function") or {}
    call["function"]["name"] = call["function"]["name"] or function.get("name") or ""
    piece = function.get("arguments")
    if isinstance(piece, str) and isinstance(call["function"]["arguments"], str):
        call["function"]["arguments"] += piece
    elif piece is not None and not isinstance(piece, str):
        call["function"]["arguments"] = piece  # a server that sends the arguments as an object


def _index_without_one(calls: dict[int, dict], call_id: str) -> int:
    """Where a fragment sent without an index belongs: the call with its id, a new call for a
    new id (or the first fragment), else the call being streamed."""
    for index, call in calls.items():
        if call_id and call["id"] == call_id:
            return index
    return len(calls) if call_id or not calls else max(calls)


# OpenAI's tool messages have no error flag (ChatCompletionRequestToolMessage: role, content,
# tool_call_id): a failed tool's result says so in its first word.
TOOL_ERROR_PREFIX = "Error: "


def openai_tool(tool: Tool) -> dict[str, Any]:
    """A ChatCompletionTool: a function with its name, description and JSON schema."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def openai_messages(message: Message) -> list[dict[str, Any]]:
    """One of our messages as OpenAI's: an assistant turn's tool calls in its ``tool_calls``
    (``content`` null when it said nothing), and the user turn answering them as one ``tool``
    message per result, then a user message only when there is text beside them."""
    if message.tool_results:
        results = [_tool_message(result) for result in message.tool_results]
        return results + ([{"role": message.role, "content": message.content}] if message.content else [])
    if message.tool_calls:
        calls = [_wire_tool_call(call) for call in message.tool_calls]
        return [{"role": message.role, "content": message.content or None, "tool_calls": calls}]
    return [{"role": message.role, "content": message.content}]


def _wire_tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments_as_sent(call)}}


def _tool_message(result: ToolResult) -> dict[str, Any]:
    content = result.content
    if result.is_error and not content.startswith(TOOL_ERROR_PREFIX):
        content = TOOL_ERROR_PREFIX + content
    return {"role": "tool", "tool_call_id": result.call_id, "content": content}


def tool_calls_of(message: dict) -> tuple[ToolCall, ...]:
    """The answer's ``message.tool_calls`` (ChatCompletionMessageToolCall), streamed or not."""
    calls = []
    for position, sent in enumerate(message.get("tool_calls") or []):
        function = sent.get("function") or {}
        calls.append(tool_call(sent.get("id") or "", function.get("name") or "", function.get("arguments"), position))
    return tuple(calls)


# One chunk with the answer and its finish_reason, then the end: what the rehearsal reads.
REHEARSAL_STREAM = (
    b'data: {"id":"rehearsal","object":"chat.completion.chunk","created":0,"model":"rehearsal",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


@lru_cache(maxsize=1)
def _rehearse_once() -> None:
    """One streamed call through the OpenAI SDK answered in memory, once per process: the
    first real call's clock then measures the provider, not the SDK warming up."""
    client = openai.OpenAI(
        api_key="rehearsal", base_url="http://rehearsal.invalid/v1", http_client=rehearsal_client(REHEARSAL_STREAM)
    )
    with client:
        raw = client.chat.completions.with_raw_response.create(
            model="rehearsal", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        read_openai_stream(raw.parse(), StreamClock())


def openai_usage(usage: dict) -> Usage:
    """OpenAI counts cache reads inside ``prompt_tokens`` and reasoning inside
    ``completion_tokens``; it has no cache-write count (its prompt cache is free to fill).
    OpenRouter adds ``cache_write_tokens`` beside ``cached_tokens``, for upstreams (Anthropic,
    Gemini) that bill writing the cache, also inside ``prompt_tokens``."""
    prompt_details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=usage.get("prompt_tokens") or 0,
        output_tokens=usage.get("completion_tokens") or 0,
        cached_tokens=prompt_details.get("cached_tokens") or 0,
        cache_write_tokens=prompt_details.get("cache_write_tokens") or 0,
        reasoning_tokens=(usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0,
    )


class OpenAICompatibleAdapter(OpenAIChatAdapter):
    name = "openai_compatible"
    needs_credential = False  # a local server may need no key, but its base URL is the credential's
    test_model = "default"
    # vLLM, Ollama and llama.cpp all read max_tokens; servers older than their
    # max_completion_tokens support ignore it silently and would answer without a limit.
    token_limit_field = "max_tokens"

    # A self-hosted model's name says nothing about OpenAI's families (gpt-oss on vLLM or
    # Ollama takes reasoning_effort), so the server is left to judge it.
    model_ids_are_openais = False
    seed_not_sent = ""  # vLLM, Ollama and llama.cpp all document seed

    def client(self) -> openai.OpenAI:
        # Only the credential's: an arm that could name the URL could send the key anywhere.
        base_url = self.credential.base_url if self.credential else ""
        if not base_url:
            raise ProviderError(ErrorCategory.BAD_REQUEST, "no base URL: an owner or admin sets it on the credential")
        api_key = (self.credential.api_key if self.credential else "") or "not-needed"
        return _openai_client(api_key, base_url, timeout_key(self.arm.config), ())


class OpenRouterAdapter(OpenAIChatAdapter):
    name = "openrouter"
    default_base_url = OPENROUTER_URL
    test_model = "openai/gpt-4.1-mini"
    # OpenRouter's documented field; it maps it onto each upstream's own.
    token_limit_field = "max_tokens"
    model_ids_are_openais = False  # it reasons with Anthropic, Google, DeepSeek … models too
    seed_not_sent = ""  # a documented request parameter, passed to the upstreams that take it

    @classmethod
    def config_errors(cls, model_name: str, config: dict) -> list[str]:
        errors = super().config_errors(model_name, config)
        if model_name.strip().lower().endswith(":online"):
            errors.append(
                f"model_name {model_name}: the :online suffix turns on OpenRouter's web search, billed per "
                "result beyond tokens, which a budget cannot hold a call to"
            )
        return errors

    def reasoning_params(self, effort: str) -> dict[str, Any]:
        return {}  # OpenRouter's own field, sent in extra_body: the SDK takes no such argument

    def extra_headers(self) -> dict[str, str]:
        return dict(OPENROUTER_HEADERS)

    def extra_body(self) -> dict[str, Any]:
        # OpenRouter's one reasoning setting for every upstream model.
        effort = self.arm.config.get("reasoning_effort")
        reasoning = {"reasoning": {"effort": effort}} if effort else {}
        return {"usage": {"include": True}} | reasoning | super().extra_body()

    def reported_cost(self, usage: dict) -> tuple[Decimal | None, dict[str, str]]:
        """With bring-your-own-key, ``usage.cost`` is only OpenRouter's fee and the spend on
        the provider is ``cost_details.upstream_inference_cost``: the cost is both."""
        fee = _number(usage.get("cost"))
        if fee is None:
            return None, {}
        upstream = _number((usage.get("cost_details") or {}).get("upstream_inference_cost"))
        byok = usage.get("is_byok")
        if byok is True and upstream is None:
            return None, {}  # the fee alone would be a fraction of the spend: leave it to the catalog
        if byok is False or upstream is None:
            return fee, {"OpenRouter": str(fee)}
        return fee + upstream, {"OpenRouter fee": str(fee), "upstream": str(upstream)}


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return Decimal(str(value))


# Azure's chat API takes max_completion_tokens from api-version 2024-09-01-preview, the version
# its o1 models first required (learn.microsoft.com/azure/ai-services/openai/how-to/reasoning:
# "2024-09-01-preview or later"); its first GA version with it is 2024-10-21. Older versions
# (2024-06-01, 2024-08-01-preview, ...) document max_tokens only and refuse the newer name.
AZURE_MAX_COMPLETION_TOKENS_SINCE = date(2024, 9, 1)
AZURE_DATED_VERSION = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:-preview)?")


def azure_takes_max_completion_tokens(api_version: str) -> bool:
    """Whether this api-version knows ``max_completion_tokens``. A version that is not a date
    (``v1``, ``preview``, ``latest``: Azure's versionless API) is the current API, which does."""
    dated = AZURE_DATED_VERSION.fullmatch(api_version.strip().lower())
    if dated is None:
        return True
    try:
        released = date(*(int(part) for part in dated.groups()))
    except ValueError:
        return True  # not a real date, so not one of the old versions either
    return released >= AZURE_MAX_COMPLETION_TOKENS_SINCE


def azure_served_model(model_name: str, deployments: dict[str, str]) -> str:
    """The model an Azure arm's calls are answered by, as its credential's deployment list
    declares it (model name -> deployment, e.g. ``{"o3": "reasoner-prod"}``). The arm names
    either a model (a key) or a deployment (a value: the model it serves is its key); a
    deployment the list does not mention is taken to be named after its model, as Azure's
    portal names them by default."""
    if model_name in deployments:
        return model_name
    serving = sorted(model for model, deployment in deployments.items() if deployment == model_name)
    return serving[0] if serving else model_name


class AzureOpenAIAdapter(OpenAIChatAdapter):
    name = "azure_openai"
    # The arm's model name (a key of the credential's deployments, else the deployment).
    test_model = "gpt-4.1-mini"
    seed_not_sent = ""  # Azure's chat completions reference (2024-10-21 and later) still documents it

    @classmethod
    def names_openai_model(cls, model_name: str) -> bool:
        # An arm may name a deployment ("reasoner-prod") whose family only the credential's
        # deployment list knows; only a name in OpenAI's own families is judged at save.
        return model_name.strip().lower().startswith(OPENAI_FAMILY_PREFIXES)

    def client(self) -> openai.OpenAI:
        credential = self.credential
        if credential is None or not credential.base_url or not credential.api_version:
            raise ProviderError(ErrorCategory.AUTHENTICATION, "Azure needs an endpoint, an api-version and a key")
        return _azure_client(
            credential.api_key, credential.base_url, credential.api_version, timeout_key(self.arm.config)
        )

    def model_for_request(self) -> str:
        deployments = self.credential.deployments if self.credential else {}
        # The deployment is part of the URL, so it comes from the credential, never the arm.
        return deployments.get(self.arm.model_name) or self.arm.model_name

    @classmethod
    def served_model(cls, model_name: str, deployments: dict[str, str]) -> str:
        return azure_served_model(model_name, deployments)

    def token_limit(self) -> str:
        api_version = self.credential.api_version if self.credential else ""
        return "max_completion_tokens" if azure_takes_max_completion_tokens(api_version) else "max_tokens"


@lru_cache(maxsize=256)
def _openai_client(api_key: str, base_url: str | None, timeouts: tuple[float, float], headers: tuple) -> openai.OpenAI:
    """Clients are reused: building one (connection pool, TLS context) costs tens of ms, and
    they are thread-safe. Keyed by everything that shapes the connection."""
    timeout = timeouts_from_key(timeouts)
    return openai.OpenAI(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,  # the gateway owns retries, so every try is seen and recorded
        timeout=timeout,
        default_headers=dict(headers),
        http_client=provider_http_client(timeout),
    )


@lru_cache(maxsize=256)
def _azure_client(api_key: str, endpoint: str, api_version: str, timeouts: tuple[float, float]) -> openai.AzureOpenAI:
    timeout = timeouts_from_key(timeouts)
    return openai.AzureOpenAI(
        api_key=api_key,
        azure_endpoint=endpoint,
        api_version=api_version,
        max_retries=0,
        timeout=timeout,
        http_client=provider_http_client(timeout),
    )


def _stable_seed(seed_key: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(seed_key.encode()).digest()[:4], "big") & 0x7FFFFFFF


def _as_dict(response: Any) -> dict:
    if isinstance(response, dict):
        return response
    if hasattr(response, "model_dump"):
        # Quietly: a compatible server's arguments sent as an object are not the SDK's str,
        # and are taken as they are (tool_calls.parse_arguments).
        return response.model_dump(mode="json", exclude_none=True, warnings=False)
    raise ValueError("unexpected response type")
