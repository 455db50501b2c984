"""Structured logs: one JSON object per line from the handler LOGGING configures, with the
request's and the job's public ids bound while they run and gone after, and no secret."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import pytest
import structlog
from django.conf import settings
from django.test import Client
from django.utils.module_loading import import_string
from structlog.contextvars import bind_contextvars, clear_contextvars

from experiments.actions import ArmSpec, do_replace_arms
from prbench.logs import formatter
from prbench.redaction import remember_secret
from tests.conftest import client_for, work_queue

RESOLVED_KEY = "azurekeyQ7w2E9r4T6y8U1i3O5p7A9s0D2f"  # not key-shaped: only the registry knows it
KEY_SHAPED = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"


def configured_handler(stream: io.StringIO) -> logging.Handler:
    """The console handler of settings.LOGGING, built as dictConfig builds it, on ``stream``."""
    config: dict = settings.LOGGING
    handler_config = config["handlers"]["console"]
    formatter_config = dict(config["formatters"][handler_config["formatter"]])
    factory = import_string(formatter_config.pop("()"))
    handler = logging.StreamHandler(stream)
    handler.setFormatter(factory(**formatter_config))
    for name in handler_config["filters"]:
        handler.addFilter(import_string(config["filters"][name]["()"])())
    return handler


@pytest.fixture
def log_lines():
    """Every line the configured handler writes at INFO and above, as parsed JSON."""
    stream = io.StringIO()
    handler = configured_handler(stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def lines() -> list[dict]:
        handler.flush()
        return [json.loads(line) for line in stream.getvalue().splitlines()]  # each one JSON, or this fails

    yield lines
    root.removeHandler(handler)
    root.setLevel(level)
    clear_contextvars()


def test_plain_and_structlog_records_are_one_json_object_per_line(log_lines):
    logging.getLogger("some.library").warning("disk %s is %d%% full", "/var", 91)
    structlog.get_logger("prbench.test").info("run planned", attempts=12)
    plain, structured = log_lines()
    assert plain["event"] == "disk /var is 91% full" and plain["level"] == "warning"
    assert plain["logger"] == "some.library" and plain["timestamp"].endswith("Z")
    assert structured["event"] == "run planned" and structured["attempts"] == 12
    assert structured["logger"] == "prbench.test" and structured["level"] == "info"


def test_an_exception_is_one_line_too(log_lines):
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("x").exception("it failed")
    (line,) = log_lines()
    assert line["event"] == "it failed" and "RuntimeError: boom" in line["exception"]


def test_no_secret_reaches_a_line_however_it_is_logged(log_lines):
    remember_secret(RESOLVED_KEY)  # as the gateway does when it resolves a credential
    logger = logging.getLogger("providers.somewhere")
    logger.warning("calling with %s and %s", RESOLVED_KEY, KEY_SHAPED)
    try:
        raise ValueError(f"the provider said: Incorrect API key provided: {KEY_SHAPED}")
    except ValueError:
        logger.exception("call failed for %s", RESOLVED_KEY[:20])
    bind_contextvars(credential=RESOLVED_KEY)
    structlog.get_logger("prbench.test").warning(
        f"event text {KEY_SHAPED}", api_key="plainvalue-without-shape-1234", note=f"Bearer {RESOLVED_KEY}"
    )
    clear_contextvars()
    lines = log_lines()
    assert len(lines) == 3
    text = json.dumps(lines)
    for secret in (RESOLVED_KEY, RESOLVED_KEY[:20], KEY_SHAPED, "plainvalue-without-shape-1234"):
        assert secret not in text
    assert "[redacted]" in lines[2]["credential"] and lines[2]["api_key"] == "[redacted]"


def test_a_request_binds_its_id_and_the_org_and_run_it_reached_then_forgets_them(log_lines, experiment, alice, start):
    run = start(experiment)
    response = client_for(alice).get(f"/runs/{run.code}/", HTTP_X_REQUEST_ID="ci-build-42.7")
    assert response.status_code == 200
    assert response["X-Request-ID"] == "ci-build-42.7"
    logging.getLogger("after").warning("outside any request")
    *during, after = log_lines()
    access = [line for line in during if line["logger"] == "prbench.requests"]
    assert access and access[-1]["event"] == f"GET /runs/{run.code}/ 200 in {access[-1]['event'].split()[-2]} ms"
    assert all(line["request_id"] == "ci-build-42.7" for line in during)
    assert access[-1]["org"] == "acme" and access[-1]["run"] == str(run.code)
    assert not {"request_id", "org", "run", "attempt"} & after.keys()


def test_an_unsafe_request_id_is_replaced_by_ours(log_lines, db):
    response = Client().get("/healthz", HTTP_X_REQUEST_ID="bad id\twith spaces")
    ours = response["X-Request-ID"]
    assert ours != "bad id\twith spaces" and len(ours) == 32
    assert log_lines()[-1]["request_id"] == ours
    assert Client().get("/healthz")["X-Request-ID"] != ours  # one per request


def test_a_job_binds_its_job_org_run_and_attempt_then_forgets_them(log_lines, experiment, start):
    do_replace_arms(experiment, [ArmSpec("down", "mock", "m", {"mode": "error", "failure_category": "overloaded"})])
    run = start(experiment, inference_only=True)
    work_queue()
    logging.getLogger("after").warning("outside any job")
    *during, after = log_lines()
    failed_calls = [line for line in during if line["event"].startswith("provider call failed")]
    assert len(failed_calls) == 4  # the gateway logs each, on the job's attempt threads
    codes = {str(code) for code in run.attempts.values_list("code", flat=True)}
    assert {line["attempt"] for line in failed_calls} == codes
    assert all(line["run"] == str(run.code) and line["org"] == "acme" for line in failed_calls)
    assert all(line["job"].startswith(f"run-{run.pk}-") for line in failed_calls)
    assert not {"job", "org", "run", "attempt"} & after.keys()


def test_the_plain_format_is_for_people_and_still_redacted(db):
    remember_secret(RESOLVED_KEY)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter("plain"))
    logger = logging.getLogger("plain.test")
    logger.addHandler(handler)
    try:
        logger.warning("key %s here", RESOLVED_KEY)
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert "key [redacted] here" in line and RESOLVED_KEY not in line
    with pytest.raises(ValueError):
        json.loads(line)


def test_an_unknown_log_format_is_refused():
    env = {**os.environ, "DEBUG": "True", "PRBENCH_LOG_FORMAT": "xml"}
    command = [sys.executable, "-c", "import prbench.settings"]
    done = subprocess.run(command, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "PRBENCH_LOG_FORMAT must be json or plain" in done.stderr
