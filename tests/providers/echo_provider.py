"""A hostile provider on 127.0.0.1: it speaks OpenAI's, Azure OpenAI's or Anthropic's real
wire format and echoes the caller's key back wherever a provider could: in error text, in
response headers, and inside the JSON of successful answers.

Each distinct request body (one attempt; its retries send the same body) plays a scenario,
chosen by the order in which bodies first arrive, so the set of outcomes is fixed however
the worker's threads interleave:

- even: 500 (OpenAI, Azure) / 529 (Anthropic) echoing the key, retried, then a 200 whose
  answer, model name, request id, extra fields and headers all carry it;
- odd: 429 echoing the key, retried, then 401 echoing it (the attempt fails).

Test-connection calls (a token limit of 1) alternate 401 / 200, and evaluator calls (a
``response_format``) alternate a judged answer quoting the key / 401.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A model's answer may quote a key-shaped lookalike; only the credential's own key goes.
LOOKALIKE = "sk-test-0000000000fixture0000"


@dataclass
class Reply:
    status: int
    body: dict
    headers: dict[str, str]


class EchoProvider:
    def __init__(self, wire: str, key: str, fail_first: bool = False) -> None:
        assert wire in ("openai", "azure", "anthropic")
        self.wire, self.key = wire, key
        self.offset = 1 if fail_first else 0  # the first attempt plays the odd scenario
        self.seen: list[tuple[str, dict[str, str], Any]] = []
        self.first_seen: dict[str, int] = {}
        self.tries: Counter[str] = Counter()
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw or b"null")
                reply = provider.respond(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                headers = {"content-type": "application/json", "content-length": str(len(data))} | reply.headers
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def respond(self, path: str, headers: dict[str, str], body: Any) -> Reply:
        fingerprint = json.dumps(body, sort_keys=True)
        with self.lock:
            self.seen.append((path, headers, body))
            kind = (
                "connection"
                if 1 in (body.get("max_tokens"), body.get("max_completion_tokens"))
                else "judge"
                if self._is_judge(body)
                else "attempt"
            )
            index = self.first_seen.setdefault(fingerprint, self.offset + len(self.first_seen))
            try_number = self.tries[fingerprint]
            self.tries[fingerprint] += 1
        if kind == "connection":
            return self.success() if try_number % 2 else self.error(401)
        if kind == "judge":
            return self.error(401) if index % 2 else self.success(judgement=True)
        if index % 2 == 0:
            return self.error(529 if self.wire == "anthropic" else 500) if try_number == 0 else self.success()
        return self.error(429) if try_number == 0 else self.error(401)

    def _is_judge(self, body: dict) -> bool:
        return "response_format" in body or "tool_choice" in body

    def echo_headers(self) -> dict[str, str]:
        request_id = "request-id" if self.wire == "anthropic" else "x-request-id"
        return {request_id: f"req_{self.key}", "x-echo-key": self.key, "x-echo-auth": f"Bearer {self.key}"}

    def error(self, status: int) -> Reply:
        return Reply(status, self.error_body(status), self.echo_headers() | {"retry-after-ms": "1"})

    def error_body(self, status: int) -> dict:
        key = self.key
        if self.wire == "anthropic":
            kind = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}[status]
            return {"type": "error", "error": {"type": kind, "message": f"invalid x-api-key: {key}"}}
        if self.wire == "azure":
            message = (
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
                f"valid key for an active subscription and use a correct regional API endpoint (api-key: {key})"
            )
            return {"error": {"code": str(status), "message": message}}
        messages = {
            401: (
                f"Incorrect API key provided: {key}. You can find your API key at "
                "https://platform.openai.com/account/api-keys."
            ),
            429: f"Rate limit reached for gpt-4o on tokens per min for the key {key}.",
            500: f"The server had an error while processing your request (Authorization: Bearer {key}).",
        }
        codes = {401: "invalid_api_key", 429: "rate_limit_exceeded", 500: None}
        kinds = {401: "invalid_request_error", 429: "tokens", 500: "server_error"}
        return {"error": {"message": messages[status], "type": kinds[status], "param": None, "code": codes[status]}}

    def success(self, judgement: bool = False) -> Reply:
        key = self.key
        answer = (
            json.dumps(
                {
                    "technical_quality": 6,
                    "correctness_confidence": 0.5,
                    "change_risk": "low",
                    "overall": 60,
                    "rationale": f"The patch sent with {key} looks fine.",
                }
            )
            if judgement
            else f"Fixed it. My key is {key}; the test fixture keeps {LOOKALIKE}.\n"
        )
        if self.wire == "anthropic":
            block = (
                {"type": "tool_use", "id": "toolu_1", "name": "judgement", "input": json.loads(answer)}
                if judgement
                else {"type": "text", "text": answer}
            )
            body: dict = {
                "id": f"msg_{key}",
                "type": "message",
                "role": "assistant",
                "model": f"claude-sonnet-4-6-{key}",
                "content": [block],
                "stop_reason": "tool_use" if judgement else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 9},
            }
        else:
            body = {
                "id": f"chatcmpl-{key}",
                "object": "chat.completion",
                "created": 1,
                "model": f"gpt-4o-{key}",
                "system_fingerprint": f"fp_{key}",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
            }
        body["echo"] = {"api_key": key, "api-key": key, key: "as a field name", "note": f"x-api-key: {key}"}
        return Reply(200, body, self.echo_headers())
