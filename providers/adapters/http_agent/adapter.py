"""A team's own agent service as an arm: PRBench hands it the whole task and gets a patch back.

The contract (the README's "A team's own agent over HTTP" says it for the teams):

- ``POST <endpoint>`` with ``{"protocol": "prbench-agent/1", "task": {...}, "deadline": ISO 8601}``
  (``task`` holds ``AgentTask``'s fields), signed: ``X-PRBench-Timestamp`` (Unix seconds) and
  ``X-PRBench-Signature: sha256=<hex HMAC-SHA256 of the secret over "<timestamp>.<body>">``.
- ``200 {"patch": "..."}`` is the answer. ``202 {"poll_url": ..., "retry_after": s}`` says it
  is coming: PRBench polls that URL with signed GETs (their body, signed, is empty) until a
  ``200 {"patch"}`` or the deadline; another 202 means not yet. There is no callback.
- The secret goes only where the credential's owner saved it: the poll URL must be on the
  endpoint's own origin, no redirect is followed, and every address passes the egress policy.

Outcomes: a 5xx, a timeout before the deadline or a broken connection is transient (the
gateway retries the call, which POSTs the task again); 401 and 403 are the agent refusing our
signature; any other 4xx is our request; the deadline passing is the agent's timeout. A 200
that is not the documented answer is the agent's malformed answer: a completion whose text is
what it sent, scored as the no patch it is, never an exception.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit

import httpx2

from prbench import egress, redaction
from providers.adapters.base import Adapter
from providers.adapters.config import COMMON_KEYS, HTTP_KEYS, Setting, positive_seconds
from providers.adapters.http_errors import connection_failure, retry_after_seconds
from providers.adapters.timeouts import DEFAULT_CONNECT_S
from providers.errors import ErrorCategory, ProviderError
from providers.models import Price
from providers.types import AgentTask, Completion, CompletionRequest, Usage

PROTOCOL = "prbench-agent/1"
TIMESTAMP_HEADER = "X-PRBench-Timestamp"
SIGNATURE_HEADER = "X-PRBench-Signature"
# The same on every call for one attempt (its first and any made after a worker died mid-call):
# a service that remembers it can answer a repeat without doing (and paying for) the work again.
IDEMPOTENCY_HEADER = "Idempotency-Key"
DEFAULT_DEADLINE_S = 300.0
# How often to poll when the agent names no retry_after, and the bounds of what it may name:
# never a busy loop, never a silence longer than a minute.
DEFAULT_POLL_S = 1.0
POLL_BOUNDS_S = (0.05, 60.0)
# Wake this long before the deadline for a last look, rather than sleeping past it.
LAST_POLL_S = 1.0
# An answer longer than this is not read further: a patch is kilobytes, an endless body is a fault.
ANSWER_MAX_BYTES = 8 * 1024 * 1024
# What an error message quotes of the agent's body.
EXCERPT_CHARS = 300
MALFORMED = "malformed"
SUBMITTED = "submitted"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The X-PRBench-Signature of ``body`` sent at ``timestamp``: what the agent recomputes."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


@dataclass(frozen=True)
class Answer:
    """What one HTTP exchange with the agent came back with."""

    status: int
    body: Any  # the parsed JSON, or the text as sent when it is not JSON
    is_json: bool
    headers: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"status": self.status, "body": self.body}

    def value_of(self, name: str) -> Any:
        return self.body.get(name) if self.is_json and isinstance(self.body, dict) else None


class HttpAgentAdapter(Adapter):
    name = "http_agent"
    needs_credential = True
    can_be_agent = False  # it is its own agent: no loop of ours drives it
    test_model = "agent"
    config_keys: ClassVar[dict[str, Setting]] = {
        "deadline_s": positive_seconds(
            label="Deadline (s)",
            help="How long the agent has to send its patch, retries included; sent to it as an absolute time",
        ),
        **{name: COMMON_KEYS[name] for name in ("max_retries", "retry_base_ms", "max_concurrency")},
        **{name: HTTP_KEYS[name] for name in ("timeout_connect_s", "timeout_read_s")},
    }

    @classmethod
    def call_seconds(cls, config: dict) -> float:
        return float(config.get("deadline_s", DEFAULT_DEADLINE_S))

    @classmethod
    def configured_price(cls, config: dict) -> Price | None:
        # The agent runs on the team's own account: a call costs PRBench's budgets nothing.
        # What the agent spent is its own, and unknown on each attempt (cost None).
        return Price(provider=cls.name, input_per_mtok=Decimal(0), output_per_mtok=Decimal(0))

    def generate(self, request: CompletionRequest) -> Completion:
        task = request.agent_task
        if task is None:
            raise ProviderError(ErrorCategory.BAD_REQUEST, "an http_agent arm answers whole tasks; this asks none")
        endpoint, secret = self._endpoint()
        ends_at = self.deadline if self.deadline is not None else time.monotonic() + self.call_seconds(self.arm.config)
        body = request_body(task, ends_at)
        started = time.perf_counter()
        with egress.http_client(httpx2.Timeout(None)) as client:
            exchange = Exchange(client, secret, ends_at, self.arm.config, body, request.idempotency_key)
            first = exchange.send("POST", endpoint, json.dumps(body, separators=(",", ":")).encode())
            answer, polls, refused = first, 0, ""
            if first.status == 202:
                poll_url, refused = poll_target(first, endpoint)
                if poll_url:
                    answer, polls = exchange.poll(poll_url, poll_wait(first))
        response = answer.record() | ({"accepted": first.record(), "polls": polls} if first.status == 202 else {})
        return self._completion(answer, refused, body, redaction.redact_data(response, (secret,)), started)

    def _endpoint(self) -> tuple[str, str]:
        credential = self.credential
        if credential is None or not credential.base_url or not credential.api_key:
            raise ProviderError(
                ErrorCategory.AUTHENTICATION, "the http_agent credential needs its endpoint and its signing secret"
            )
        return credential.base_url, credential.api_key

    def _completion(self, answer: Answer, refused: str, body: dict, response: dict, started: float) -> Completion:
        patch = answer.value_of("patch")
        problem = refused or malformed_reason(answer, patch)
        return Completion(
            text=shown_text(answer) if problem else patch,
            finish_reason=MALFORMED if problem else SUBMITTED,
            usage=Usage(),
            latency_ms=round((time.perf_counter() - started) * 1000),
            cost_usd=None,  # the agent's own spending: PRBench cannot know it
            cost_source="",
            model_served=self.arm.model_name,
            request_id=answer.headers.get("x-request-id", ""),
            raw_request=body,
            raw_response=response,
            usage_reported=False,
            warnings=(f"the agent's answer is not the documented one: {problem}",) if problem else (),
        )


def request_body(task: AgentTask, ends_at: float) -> dict[str, Any]:
    """The JSON the agent is sent: the task and the deadline as a wall-clock time (the agent's
    clock, not our monotonic one, is what it can compare with)."""
    deadline = datetime.now(UTC) + timedelta(seconds=max(0.0, ends_at - time.monotonic()))
    fields = asdict(task) | {"test_command": list(task.test_command)}
    return {"protocol": PROTOCOL, "task": fields, "deadline": deadline.isoformat(timespec="seconds")}


def poll_target(accepted: Answer, endpoint: str) -> tuple[str, str]:
    """Where to poll, resolved against the endpoint, and "" with why when it may not be polled:
    the signature would carry the secret's work to a server it was not saved for."""
    poll_url = accepted.value_of("poll_url")
    if not isinstance(poll_url, str) or not poll_url:
        return "", "a 202 without a poll_url"
    try:
        target = urljoin(endpoint, poll_url)
        elsewhere = origin(target) != origin(endpoint)
    except ValueError:  # a port that is not a number, a broken IPv6 address
        return "", "its poll_url is not a URL"
    if elsewhere:
        return "", "its poll_url is not on the endpoint's origin: not polled (the secret stays with the endpoint)"
    return target, ""


def poll_wait(answer: Answer) -> float:
    asked = answer.value_of("retry_after")
    if not isinstance(asked, (int, float)) or isinstance(asked, bool):
        asked = retry_after_seconds(answer.headers, answer.status) or DEFAULT_POLL_S
    low, high = POLL_BOUNDS_S
    return min(max(float(asked), low), high)


def malformed_reason(answer: Answer, patch: Any) -> str:
    if answer.status != 200:
        return f"HTTP {answer.status}"
    if not answer.is_json:
        return "the body is not JSON"
    if not isinstance(patch, str):
        return 'the body has no string "patch"'
    return ""


def shown_text(answer: Answer) -> str:
    """A malformed answer as the attempt keeps it: what the agent sent, as text."""
    return answer.body if isinstance(answer.body, str) else json.dumps(answer.body)


class Exchange:
    """The signed requests of one call to the agent, each within what is left of its deadline."""

    def __init__(
        self, client: httpx2.Client, secret: str, ends_at: float, config: dict, body: dict, idempotency_key: str = ""
    ):
        self.client = client
        self.idempotency_key = idempotency_key
        self.secret = secret
        self.ends_at = ends_at
        self.config = config
        self.body = body  # the request record, for errors

    def poll(self, url: str, wait_s: float) -> tuple[Answer, int]:
        polls = 0
        while True:
            left = self.ends_at - time.monotonic()
            if left <= 0:
                raise self.fail(ErrorCategory.TIMEOUT, self.deadline_passed())
            pause = min(wait_s, left)
            if pause < wait_s and left > LAST_POLL_S:
                pause = left - LAST_POLL_S  # a last look before the deadline, not a sleep past it
            time.sleep(pause)
            answer = self.send("GET", url, b"")
            polls += 1
            if answer.status != 202:
                return answer, polls
            wait_s = poll_wait(answer)

    def send(self, method: str, url: str, content: bytes) -> Answer:
        """One signed request; an answer of 200 or 202, or ``ProviderError`` by the outcome table."""
        timestamp = str(int(time.time()))
        headers = {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature(self.secret, timestamp, content)}
        if content:
            headers["Content-Type"] = "application/json"
            if self.idempotency_key:  # on the POST that starts the work; a poll is safe to repeat
                headers[IDEMPOTENCY_HEADER] = self.idempotency_key
        try:
            with self.client.stream(method, url, content=content, headers=headers, timeout=self.timeout()) as reply:
                answer = read_answer(reply)
        except httpx2.HTTPError as exc:
            raise self.transport_error(exc) from None
        except egress.EgressRefused as exc:
            raise self.fail(ErrorCategory.EGRESS_REFUSED, str(exc)) from None
        if answer.status in (200, 202):
            return answer
        raise self.status_error(answer)

    def timeout(self) -> httpx2.Timeout:
        left = max(0.001, self.ends_at - time.monotonic())
        connect = float(self.config.get("timeout_connect_s", DEFAULT_CONNECT_S))
        read = float(self.config.get("timeout_read_s", left))
        return httpx2.Timeout(min(read, left), connect=min(connect, left))

    def transport_error(self, exc: httpx2.HTTPError) -> ProviderError:
        refused = egress.refusal_in(exc)
        if refused is not None:
            return self.fail(ErrorCategory.EGRESS_REFUSED, str(refused))
        if isinstance(exc, httpx2.TimeoutException) and time.monotonic() >= self.ends_at:
            return self.fail(ErrorCategory.TIMEOUT, self.deadline_passed())
        if isinstance(exc, httpx2.ReadTimeout):
            return self.fail(ErrorCategory.TIMEOUT, "the agent sent nothing within the read timeout")
        return self.fail(ErrorCategory.CONNECTION, connection_failure(exc))

    def status_error(self, answer: Answer) -> ProviderError:
        status = answer.status
        text = shown_text(answer)[:EXCERPT_CHARS]
        if status in (401, 403):
            category = ErrorCategory.AUTHENTICATION  # the agent refused our signature
        elif status == 429:
            category = ErrorCategory.RATE_LIMITED
        elif 500 <= status <= 599:
            category = ErrorCategory.SERVER_ERROR
        elif 300 <= status <= 499:
            category = ErrorCategory.BAD_REQUEST  # a redirect too: the secret follows none
        else:
            category = ErrorCategory.UNKNOWN
        error = self.fail(category, f"the agent answered HTTP {status}: {text}")
        error.retry_after = retry_after_seconds(answer.headers, status)
        return error

    def deadline_passed(self) -> str:
        return f"the agent sent no patch by its deadline ({self.body['deadline']})"

    def fail(self, category: ErrorCategory, message: str) -> ProviderError:
        error = ProviderError(category, message)
        error.raw_request = self.body
        return error


def read_answer(reply: httpx2.Response) -> Answer:
    """The reply's status and body, read up to ``ANSWER_MAX_BYTES``: JSON when it parses."""
    taken = b""
    for chunk in reply.iter_bytes():
        taken += chunk
        if len(taken) > ANSWER_MAX_BYTES:
            break
    headers = {name.lower(): value for name, value in reply.headers.items()}
    if len(taken) > ANSWER_MAX_BYTES:
        cut = taken[:EXCERPT_CHARS].decode("utf-8", "replace")
        return Answer(reply.status_code, f"{cut}… (more than {ANSWER_MAX_BYTES} bytes; not read)", False, headers)
    text = taken.decode("utf-8", "replace")
    try:
        return Answer(reply.status_code, json.loads(text), True, headers)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return Answer(reply.status_code, text, False, headers)
