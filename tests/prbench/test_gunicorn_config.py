"""gunicorn.conf.py, the web server's configuration the README runs: a response that takes
longer than the worker timeout (a large download to a slow client) is served whole, where
gunicorn's default sync worker is killed mid-response (its WORKER TIMEOUT)."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from tests.prbench.slow_wsgi import SLOW_CHUNKS
from tests.prbench.test_login_throttling import free_port, stop

TIMEOUT_S = 2  # shorter than the response's SLOW_CHUNKS seconds


def test_a_response_longer_than_the_timeout_is_served_whole(tmp_path: Path):
    port, log = free_port(), tmp_path / "gunicorn.log"
    command = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "tests.prbench.slow_wsgi:app"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", str(TIMEOUT_S)]
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=dict(os.environ),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        body = _get_when_serving(port, process, log)
    finally:
        stop(process)
    assert body.decode().splitlines() == [f"line {number}" for number in range(SLOW_CHUNKS)]
    assert "WORKER TIMEOUT" not in log.read_text()
    assert "Using worker: gthread" in log.read_text()


def _get_when_serving(port: int, process: subprocess.Popen, log: Path) -> bytes:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=SLOW_CHUNKS + 10)
        try:
            connection.request("GET", "/")
        except ConnectionRefusedError:  # not listening yet
            time.sleep(0.2)
            continue
        try:
            return connection.getresponse().read()
        except http.client.IncompleteRead:
            raise AssertionError(f"the response was cut: {log.read_text()}") from None
        finally:
            connection.close()
    raise AssertionError(f"gunicorn did not serve within 30 s: {log.read_text()}")
