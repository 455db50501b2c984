"""Every row of the table of provider answers (providers/adapters/error_answers.py) replayed
through the real SDKs, the provider faked at the HTTP boundary with its documented error
bodies: each ends in the row's category and outcome class. And the README prints the table.

Bodies: OpenAI's ``{"error": {"message", "type", "param", "code"}}`` (the OpenAPI document's
ErrorResponse), Azure's the same with its own codes (``DeploymentNotFound``, ``content_filter``
with ``innererror``), Anthropic's ``{"type": "error", "error": {"type", "message"}}`` with its
documented types and statuses (docs.anthropic.com "Errors"), and the same types as an
``event: error`` in the middle of a stream.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from experiments.models import AttemptStatus
from providers.adapters.error_answers import ANSWER_BY_KEY, ERROR_ANSWERS, markdown_table
from providers.errors import ProviderError
from providers.models import ProviderCredential
from providers.outcomes import OutcomeClass, outcome_class
from tests.providers import contracts
from tests.providers.contracts import KEY, call
from tests.providers.fake_server import Reply, sse
from tests.providers.sse_fixtures import PING, anthropic_start, anthropic_text_events, openai_events


def openai_error(message: str, code: str | None = None, kind: str | None = "invalid_request_error", **extra) -> dict:
    return {"error": {"message": message, "type": kind, "param": extra.pop("param", None), "code": code} | extra}


def anthropic_error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_stream_error(kind: str, message: str) -> Reply:
    """Anthropic's documented ``event: error`` after a stream began with 200."""
    return Reply(events=[anthropic_start(), PING, sse(anthropic_error(kind, message), "error")])


@dataclass
class Replay:
    """One documented answer, sent to one adapter."""

    name: str
    wire: str
    reply: Reply | None = None
    config: dict = field(default_factory=dict)
    # Sets up what is not a reply (a closed port, a full listen queue, an egress policy):
    # given the org and the pytest settings, yields while the call is made.
    around: Callable[..., Iterator[None]] | None = None


def _point_at(org, port: int) -> None:
    for credential in ProviderCredential.objects.filter(org=org):
        suffix = contracts.WIRES[credential.provider].base_suffix
        credential.base_url = f"http://127.0.0.1:{port}{suffix}"
        credential.save()


def nothing_listens(org, settings) -> Iterator[None]:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    _point_at(org, port)
    yield


def a_full_listen_queue(org, settings) -> Iterator[None]:
    """A port that listens but never accepts, its queue filled: the kernel drops the next
    SYN, so the connection is never made and the connect timeout fires, as at a host that
    does not answer. The request never reaches the provider."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    held = []
    for _ in range(8):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(server.getsockname())
        held.append(client)
    _point_at(org, server.getsockname()[1])
    try:
        yield
    finally:
        for each in [*held, server]:
            each.close()


def loopback_refused(org, settings) -> Iterator[None]:
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = ()
    yield


WINDOW_BY_OUTPUT = (
    "This model's maximum context length is 8192 tokens. However, you requested 10000 tokens "
    "(2000 in the messages, 8000 in the completion). Please reduce the length of the messages or completion."
)
WINDOW_BY_PROMPT = (
    "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens "
    "(9000 in the messages, 100 in the completion). Please reduce the length of the messages or completion."
)
OPENAI_STREAM_ERROR = {  # OpenRouter's documented mid-stream error: the upstream status as its code
    "id": "gen-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "served-model",
    "error": {"code": 502, "message": "Provider disconnected"},
    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
}
OPENAI = ("openai", "azure_openai", "openrouter", "openai_compatible")

REPLAYS: dict[str, list[Replay]] = {
    "output_limit_beyond_window": [
        Replay(
            "openai max_tokens too large",
            "openai",
            Reply(
                400,
                openai_error(
                    "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
                    "whereas you provided 100000.",
                    "invalid_value",
                    param="max_tokens",
                ),
            ),
        ),
        Replay(
            "vllm prompt fits, completion does not",
            "openai_compatible",
            Reply(400, openai_error(WINDOW_BY_OUTPUT, "context_length_exceeded")),
        ),
        Replay(
            "anthropic max_tokens beyond the model's",
            "anthropic",
            Reply(
                400,
                anthropic_error(
                    "invalid_request_error",
                    "max_tokens: 300000 > 64000, which is the maximum allowed number of output tokens for "
                    "claude-sonnet-4-5-20250929",
                ),
            ),
        ),
        Replay(
            "anthropic input + max_tokens beyond the window",
            "anthropic",
            Reply(
                400,
                anthropic_error(
                    "invalid_request_error",
                    "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input "
                    "length or `max_tokens` and try again",
                ),
            ),
        ),
    ],
    "prompt_beyond_window": [
        Replay("openai prompt alone", "openai", Reply(400, openai_error(WINDOW_BY_PROMPT, "context_length_exceeded"))),
        Replay(
            "openai messages alone",
            "azure_openai",
            Reply(
                400,
                openai_error(
                    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                    "130000 tokens. Please reduce the length of the messages.",
                    "context_length_exceeded",
                    param="messages",
                ),
            ),
        ),
        Replay(
            "anthropic prompt too long",
            "anthropic",
            Reply(400, anthropic_error("invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum")),
        ),
    ],
    "content_filtered": [
        Replay(
            "azure content filter",
            "azure_openai",
            Reply(
                400,
                openai_error(
                    "The response was filtered due to the prompt triggering Azure OpenAI's content management "
                    "policy. Please modify your prompt and retry.",
                    "content_filter",
                    kind=None,
                    param="prompt",
                    status=400,
                    innererror={"code": "ResponsibleAIPolicyViolation", "content_filter_result": {}},
                ),
            ),
        ),
        Replay(
            "openai flagged prompt",
            "openai",
            Reply(
                400,
                openai_error(
                    "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
                    "invalid_prompt",
                ),
            ),
        ),
    ],
    "request_too_large": [
        Replay(
            "anthropic request_too_large",
            "anthropic",
            Reply(413, anthropic_error("request_too_large", "Request exceeds the maximum allowed number of bytes.")),
        ),
    ],
    "unsupported_parameter": [
        Replay(
            "openai max_tokens on a reasoning model",
            "openai",
            Reply(
                400,
                openai_error(
                    "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                    "'max_completion_tokens' instead.",
                    "unsupported_parameter",
                    param="max_tokens",
                ),
            ),
        ),
        Replay(
            "openai temperature on a reasoning model",
            "openai",
            Reply(
                400,
                openai_error(
                    "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) "
                    "value is supported.",
                    "unsupported_value",
                    param="temperature",
                ),
            ),
        ),
        Replay(
            "azure api-version before max_completion_tokens",
            "azure_openai",
            Reply(400, openai_error("Unrecognized request argument supplied: max_completion_tokens")),
        ),
        Replay(
            "anthropic extra_body",
            "anthropic",
            Reply(400, anthropic_error("invalid_request_error", "top_k_sampling: Extra inputs are not permitted")),
        ),
    ],
    "bad_request": [
        Replay(
            "openai invalid value",
            "openai",
            Reply(400, openai_error("Invalid value for 'temperature': must be between 0 and 2.", "invalid_value")),
        ),
        Replay("openrouter 422", "openrouter", Reply(422, openai_error("Unprocessable"))),
        Replay(
            "anthropic invalid request",
            "anthropic",
            Reply(400, anthropic_error("invalid_request_error", "messages: roles must alternate")),
        ),
    ],
    "authentication": [
        Replay(
            "openai invalid key",
            "openai",
            Reply(401, openai_error("Incorrect API key provided: sk-***.", "invalid_api_key")),
        ),
        Replay("anthropic", "anthropic", Reply(401, anthropic_error("authentication_error", "invalid x-api-key"))),
    ],
    "permission": [
        Replay("openai 403", "openai", Reply(403, openai_error("You are not allowed to sample from this model"))),
        Replay("anthropic billing", "anthropic", Reply(402, anthropic_error("billing_error", "Your credit is low"))),
        Replay("anthropic 403", "anthropic", Reply(403, anthropic_error("permission_error", "Not allowed"))),
    ],
    "not_found": [
        Replay(
            "openai model",
            "openai",
            Reply(
                404,
                openai_error(
                    "The model `gpt-nope` does not exist or you do not have access to it.",
                    "model_not_found",
                    param="model",
                ),
            ),
        ),
        Replay(
            "azure deployment",
            "azure_openai",
            Reply(
                404,
                {
                    "error": {
                        "code": "DeploymentNotFound",
                        "message": "The API deployment for this resource does not exist. If you created the "
                        "deployment within the last 5 minutes, please wait a moment and try again.",
                    }
                },
            ),
        ),
        Replay("anthropic model", "anthropic", Reply(404, anthropic_error("not_found_error", "model: claude-nope"))),
    ],
    "provider_timeout": [
        Replay("openai 408", "openai", Reply(408, openai_error("Request timed out.", kind="timeout"))),
        Replay("openrouter 504", "openrouter", Reply(504, "<html>504 Gateway Time-out</html>")),
        Replay("anthropic 504", "anthropic", Reply(504, anthropic_error("timeout_error", "Request timed out"))),
        Replay(
            "anthropic timeout_error mid-stream",
            "anthropic",
            anthropic_stream_error("timeout_error", "Request timed out"),
        ),
    ],
    "rate_limited": [
        Replay("openai", "openai", Reply(429, openai_error("Rate limit reached", "rate_limit_exceeded"))),
        Replay("anthropic", "anthropic", Reply(429, anthropic_error("rate_limit_error", "Number of requests"))),
    ],
    "overloaded": [
        Replay("openai 503", "openai", Reply(503, openai_error("The engine is currently overloaded", kind="server"))),
        Replay("anthropic 529", "anthropic", Reply(529, anthropic_error("overloaded_error", "Overloaded"))),
        Replay("anthropic mid-stream", "anthropic", anthropic_stream_error("overloaded_error", "Overloaded")),
    ],
    "server_error": [
        Replay("openai 500", "openai", Reply(500, openai_error("The server had an error", kind="server_error"))),
        Replay("anthropic 500", "anthropic", Reply(500, anthropic_error("api_error", "Internal server error"))),
        Replay("anthropic api_error mid-stream", "anthropic", anthropic_stream_error("api_error", "Internal")),
        Replay(
            "openrouter error chunk mid-stream",
            "openrouter",
            Reply(events=[*openai_events()[:2], sse(OPENAI_STREAM_ERROR)]),
        ),
    ],
    "other_status": [Replay("a teapot", "openai", Reply(418, openai_error("I'm a teapot")))],
    "no_connection": [
        Replay(name, name, around=nothing_listens, config={"timeout_connect_s": 1}) for name in ("openai", "anthropic")
    ],
    "connect_timeout": [
        Replay(name, name, around=a_full_listen_queue, config={"timeout_connect_s": 0.3})
        for name in ("openai", "anthropic")
    ],
    "read_timeout": [
        Replay("openai", "openai", Reply(200, contracts.WIRES["openai"].success, delay_s=2), {"timeout_read_s": 0.3}),
        Replay(
            "anthropic",
            "anthropic",
            Reply(200, contracts.WIRES["anthropic"].success, delay_s=2),
            {"timeout_read_s": 0.3},
        ),
    ],
    "total_timeout": [
        Replay(
            "anthropic trickle",
            "anthropic",
            Reply(events=anthropic_text_events(), piece_bytes=3, piece_delay_s=0.02),
            {"timeout_read_s": 30, "timeout_total_s": 0.3},
        ),
        Replay(
            "openai trickle",
            "openai",
            Reply(events=openai_events(), piece_bytes=3, piece_delay_s=0.02),
            {"timeout_read_s": 30, "timeout_total_s": 0.3},
        ),
    ],
    "stream_cut": [
        Replay("openai", "openai", Reply(events=openai_events(), framing="close", cut_after=2)),
        Replay("anthropic", "anthropic", Reply(events=anthropic_text_events(), framing="close", cut_after=3)),
    ],
    "malformed": [
        Replay("openai", "openai", Reply(200, "{this is not json")),
        Replay("anthropic", "anthropic", Reply(200, "{this is not json")),
    ],
    "egress_refused": [Replay(name, name, around=loopback_refused) for name in ("openai", "anthropic", "azure_openai")],
}

CASES = [(replay.wire, key, replay) for key, replays in REPLAYS.items() for replay in replays]


def test_every_row_is_replayed():
    assert list(REPLAYS) == [answer.key for answer in ERROR_ANSWERS]
    assert all(REPLAYS.values())


@pytest.mark.parametrize(
    "wire, key, replay", CASES, ids=[f"{key}: {replay.name}" for _, key, replay in CASES], indirect=["wire"]
)
def test_each_answer_ends_in_its_rows_category_and_class(wire, fake, settings, key, replay):
    spec, org = wire
    answer = ANSWER_BY_KEY[key]
    if replay.reply is not None:
        fake.script(replay.reply)
    around = replay.around(org, settings) if replay.around else iter([None])
    next(around)
    with pytest.raises(ProviderError) as caught:
        call(org, spec, **replay.config)
    next(around, None)
    error = caught.value
    assert error.category == answer.category, error.message
    assert outcome_class(AttemptStatus.FAILED, error.category) == answer.outcome
    assert KEY not in error.message


def test_timeouts_are_the_models_only_once_the_provider_had_the_request():
    classes = {key: ANSWER_BY_KEY[key].outcome for key in ("connect_timeout", "provider_timeout", "read_timeout")}
    assert classes == {
        "connect_timeout": OutcomeClass.INFRASTRUCTURE_FAILURE,
        "provider_timeout": OutcomeClass.INFRASTRUCTURE_FAILURE,
        "read_timeout": OutcomeClass.MODEL_FAILURE,
    }


def test_the_readme_prints_the_table():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert markdown_table() in readme
