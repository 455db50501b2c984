"""Structured logs: every record, ours and third parties', as one JSON object per line.

structlog's stdlib integration does the work: ``ProcessorFormatter`` (the formatter in
``LOGGING``) renders both structlog's events and plain ``logging`` records, so the codebase's
``logging.getLogger(__name__)`` calls need no change. Each line has ``timestamp``, ``level``,
``logger`` and ``event``, plus the context bound for the request or job it was written in
(structlog.contextvars): ``request_id`` and ``org`` in a request, ``job``, ``org``, ``run`` and
``attempt`` in a worker. Context is cleared at the end of every request and job, so nothing
leaks into the next one.

``PRBENCH_LOG_FORMAT``: ``json`` (the default, for log shippers) or ``plain`` (structlog's
console renderer, for a person at a terminal).

No secret: the redaction the rest of PRBench uses (prbench/redaction.py) runs on every
value of every event (bound context included), on the formatted exception, and once more on
the finished line, whatever its format.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

import structlog
from django.http import HttpRequest, HttpResponse
from structlog.contextvars import bind_contextvars, clear_contextvars, merge_contextvars
from structlog.typing import EventDict, Processor, WrappedLogger

from prbench.redaction import known_secrets, redact_data, redact_text

FORMATS = ("json", "plain")


def redact_event(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """Every key and value, recursively: a bound ``api_key=`` loses its value whatever it is,
    a key-shaped token or a key this process resolved loses itself wherever it appears."""
    secrets = known_secrets()
    return {
        redact_text(key, secrets): value if key.startswith("_") else redact_data(value, secrets)
        for key, value in event_dict.items()
    }


def redact_line(logger: WrappedLogger, method: str, line: str) -> str:
    """The rendered line, once more: a value only its ``repr`` showed (an object) is covered too.
    The marker has no quote or backslash, so a JSON line stays JSON."""
    return redact_text(line, known_secrets())


def pre_chain() -> list[Processor]:
    """What every line gets, structlog's events and plain records alike."""
    return [
        merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    ]


def formatter(log_format: str) -> structlog.stdlib.ProcessorFormatter:
    """The formatter ``LOGGING`` installs on its handler (a "()" factory, called when Django
    configures logging, which is when structlog is configured too)."""
    configure_structlog()
    if log_format not in FORMATS:
        raise ValueError(f"PRBENCH_LOG_FORMAT must be json or plain, not {log_format!r}")
    processors: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if log_format == "json":
        processors += [structlog.processors.format_exc_info, redact_event, structlog.processors.JSONRenderer()]
    else:  # the console renderer formats the exception itself; the line is redacted after
        processors += [redact_event, structlog.dev.ConsoleRenderer(colors=False)]
    processors.append(redact_line)  # type: ignore[arg-type]  # the last processor takes the rendered line
    return structlog.stdlib.ProcessorFormatter(foreign_pre_chain=pre_chain(), processors=processors)


def configure_structlog() -> None:
    """structlog's own loggers hand their events to the stdlib handlers in ``LOGGING``, so
    they pass the same filters (redaction) and come out in the same format."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *pre_chain(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


# A client's own request id is kept when it is a plain token (a UUID, a load balancer's id);
# anything else (too long, spaces, control characters) is replaced by ours.
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
REQUEST_ID_HEADER = "X-Request-ID"
access_log = logging.getLogger("prbench.requests")


def request_id_of(request: HttpRequest) -> str:
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if SANE_REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def logged_path(request: HttpRequest) -> str:
    """The path as the access log writes it: a route whose URL is its own permission (a
    ``token`` in the path, as an agent's archive URL) has the token left out."""
    match = request.resolver_match
    token = match.kwargs.get("token") if match is not None else None
    return request.path.replace(token, "[token]") if isinstance(token, str) and token else request.path


class RequestContextMiddleware:
    """Binds ``request_id`` for every line written while the request is handled (the access
    helpers add ``org``, ``run``, ``attempt`` as they resolve them), returns the id in the
    response's ``X-Request-ID``, writes one access line at INFO, and clears the context."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        clear_contextvars()
        request_id = request_id_of(request)
        bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            # The path, never the query string: a query can carry a token.
            elapsed_ms = round((time.perf_counter() - started) * 1000)
            access_log.info("%s %s %s in %s ms", request.method, logged_path(request), response.status_code, elapsed_ms)
            return response
        finally:
            clear_contextvars()
