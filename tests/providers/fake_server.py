"""A local HTTP server that answers with scripted provider responses, so the real SDKs run
end to end over a real socket. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON, str/bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeProvider:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.default: Reply = Reply(500, {"error": {"message": "no reply scripted"}})
        self.seen: list[Seen] = []
        # When set, answers every request from what was sent (a provider's own checks),
        # instead of the scripted replies.
        self.responder: Callable[[Seen], Reply] | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode(errors="replace")
                seen = Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                fake.seen.append(seen)
                if fake.responder is not None:
                    reply = fake.responder(seen)
                else:
                    reply = fake.replies.pop(0) if fake.replies else fake.default
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if isinstance(reply.body, (str, bytes)) else json.dumps(reply.body)
                data = payload.encode() if isinstance(payload, str) else payload
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, *replies: Reply) -> None:
        self.replies = list(replies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
