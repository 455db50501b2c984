"""A local HTTP server that answers with scripted provider responses, so the real SDKs run
end to end over a real socket. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
import socket
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
    # A Server-Sent Events stream instead of a body: each item one event's text, as written
    # on the wire ("data: {...}\n\n"; see sse()). Sent with chunked transfer encoding, or
    # with no framing at all (the body ends when the connection closes: framing="close").
    events: list[str] | None = None
    framing: str = "chunked"
    # Each event written in pieces of this many bytes (0: whole), with this pause before
    # each piece: a server that trickles its answer.
    piece_bytes: int = 0
    piece_delay_s: float = 0.0
    # Close the connection after this many events, without the rest or the end of the body.
    cut_after: int | None = None
    # A JSON body: close the connection after this many of its bytes (its content-length whole).
    cut_body_at: int | None = None


def sse(data: Any, event: str | None = None) -> str:
    """One event as a provider writes it: an optional ``event:`` line, a ``data:`` line
    (JSON unless a string: ``[DONE]``), and the blank line that ends it."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


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
                if reply.events is not None:
                    self.send_events(reply)
                    return
                payload = reply.body if isinstance(reply.body, (str, bytes)) else json.dumps(reply.body)
                data = payload.encode() if isinstance(payload, str) else payload
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data[: reply.cut_body_at])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def send_events(self, reply: Reply) -> None:
                chunked = reply.framing == "chunked"
                events = reply.events or []
                self.close_connection = True  # one stream per connection, as the tests need
                # Each event goes out when written, as a provider's server sends it; without
                # this, Nagle holds small writes for the client's delayed ACK (~40 ms).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    if chunked:  # chunked encoding needs HTTP/1.1; BaseHTTPRequestHandler speaks 1.0
                        self.protocol_version = "HTTP/1.1"
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream; charset=utf-8")
                    self.send_header("cache-control", "no-cache")
                    self.send_header("connection", "close")
                    if chunked:
                        self.send_header("transfer-encoding", "chunked")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for number, event in enumerate(events):
                        if reply.cut_after is not None and number >= reply.cut_after:
                            return  # closed mid-stream: no terminal event, no end of body
                        self.write_event(event.encode(), reply, chunked)
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def write_event(self, data: bytes, reply: Reply, chunked: bool) -> None:
                size = reply.piece_bytes or len(data)
                for start in range(0, len(data), size):
                    if reply.piece_delay_s:
                        time.sleep(reply.piece_delay_s)
                    piece = data[start : start + size]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)

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
