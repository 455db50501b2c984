"""A team's agent service as the tests run it: a local HTTP server that checks PRBench's HMAC
signature the way the README tells teams to, may download the task's archive, and answers a
patch synchronously or through polls. It shares no code with the adapter, so a signature the
adapter gets wrong is refused here. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import tarfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class AgentServer:
    def __init__(self, secret: str, patch_for: Callable[[dict], str] = lambda task: "") -> None:
        self.secret = secret
        self.patch_for = patch_for  # the answer to a task, from the task as sent
        self.polls_before_answer = 0  # > 0: answer 202 with a poll_url, and 202 to that many polls
        self.poll_url = "/jobs/1"
        self.retry_after = 0.05
        self.delay_s = 0.0  # before answering the POST
        self.body: bytes | None = None  # a 200 with this body instead of the patch
        self.failures: list[int] = []  # statuses the next POSTs get, one each, before any answer
        self.fetch_archive = False
        self.fetched: list[list[str]] = []  # the member names of each archive downloaded
        self.requests: list[Request] = []
        self.refused = 0
        self.task: dict = {}  # the last task sent: what a poll answers (the poll tests send one)
        self.answered_polls = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                server.handle(self, "POST")

            def do_GET(self) -> None:
                server.handle(self, "GET")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/agent"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def signed(self, headers: dict[str, str], body: bytes) -> bool:
        timestamp = headers.get("x-prbench-timestamp", "")
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > 300:
            return False
        expected = hmac.new(self.secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(headers.get("x-prbench-signature", ""), f"sha256={expected}")

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = Request(method, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body)
        self.requests.append(request)
        if not self.signed(request.headers, body):
            self.refused += 1
            return self.reply(handler, 401, {"error": "bad signature"})
        if method == "POST" and self.failures:
            return self.reply(handler, self.failures.pop(0), {"error": "scripted failure"})
        if method == "POST":
            return self.answer_task(handler, request.json())
        if self.answered_polls < self.polls_before_answer:
            self.answered_polls += 1
            return self.reply(handler, 202, {"poll_url": self.poll_url, "retry_after": self.retry_after})
        return self.reply(handler, 200, self.patch_body(self.task))

    def answer_task(self, handler: BaseHTTPRequestHandler, sent: dict) -> None:
        task = self.task = sent["task"]  # a run's tasks arrive at once: each answer reads its own
        if self.fetch_archive and task["archive_url"]:
            with urllib.request.urlopen(task["archive_url"], timeout=30) as archive:
                downloaded = archive.read()
            with tarfile.open(fileobj=io.BytesIO(downloaded), mode="r:gz") as tar:
                self.fetched.append(tar.getnames())
        time.sleep(self.delay_s)
        if self.polls_before_answer:
            return self.reply(handler, 202, {"poll_url": self.poll_url, "retry_after": self.retry_after})
        return self.reply(handler, 200, self.patch_body(task))

    def patch_body(self, task: dict) -> bytes:
        return self.body if self.body is not None else json.dumps({"patch": self.patch_for(task)}).encode()

    def reply(self, handler: BaseHTTPRequestHandler, status: int, body: dict | bytes) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller gave up waiting (its deadline): nobody reads the answer
