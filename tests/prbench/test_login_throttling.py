"""Login throttling holds across processes.

Two real gunicorn servers share the test database and the test Redis (the cache, where
allauth counts failed logins), as N web workers behind one load balancer do; the test's
attempts alternate between them. Most requests carry the same Host header, as requests
through one load balancer do; one test rotates it, as an attacker can (the count of an
account's failures must not depend on it).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

HOST = "localhost"
LOGIN = "/accounts/login/"
START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 10
WRONG = "The email address and/or password you specified are not correct."
REFUSED = "Too many failed login attempts. Try again later."


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


class Browser:
    """One client's cookies, sent to whichever server answers (all on 127.0.0.1), with the Host
    header it chooses."""

    def __init__(self, host: str = HOST) -> None:
        self.host = host
        self.cookies: dict[str, str] = {}

    def request(self, port: int, method: str, path: str, data: dict | None = None) -> tuple[int, str, str]:
        headers = {"Host": self.host, "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if data is not None:
            body = urlencode(data)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            content = response.read().decode()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status, response.getheader("Location") or "", content
        finally:
            conn.close()

    def csrf_token(self, port: int) -> str:
        status, _, content = self.request(port, "GET", LOGIN)
        assert status == 200, content[:500]
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', content)
        assert match, content[:500]
        return match.group(1)

    def log_in(self, port: int, password: str, path: str = LOGIN) -> str:
        """'signed in', 'wrong' or 'refused'."""
        token = self.csrf_token(port)
        status, _, content = self.request(
            port, "POST", path, {"csrfmiddlewaretoken": token, "login": "alice@example.com", "password": password}
        )
        if status == 302 and "sessionid" in self.cookies:
            return "signed in"
        assert status == 200, (status, content[:500])
        assert (WRONG in content) != (REFUSED in content), content[:2000]
        return "wrong" if WRONG in content else "refused"


def wait_until_serving(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"server on {port} exited:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(OSError):
            if Browser().request(port, "GET", LOGIN)[0] == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"server on {port} did not answer in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """The server and its worker form their own process group: stop that group, and only it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def two_servers(tmp_path: Path) -> Iterator[list[int]]:
    # The test settings module derives REDIS_URL from the same variables this process used,
    # so the servers' cache is this test's Redis database (flushed around every test).
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "prbench.settings_test", "DATABASE_URL": database_url()}
    processes: list[subprocess.Popen] = []
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"server-{port}.log" for port in ports]
    try:
        for port, log in zip(ports, logs, strict=True):
            command = [sys.executable, "-m", "gunicorn", "prbench.wsgi", "--bind", f"127.0.0.1:{port}"]
            command += ["--workers", "1", "--timeout", "30", "--graceful-timeout", "2", "--log-level", "warning"]
            with log.open("w") as out:
                processes.append(
                    subprocess.Popen(
                        command,
                        cwd=settings.BASE_DIR,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        for port, process, log in zip(ports, processes, logs, strict=True):
            wait_until_serving(port, process, log)
        yield ports
    finally:
        for process in processes:
            stop(process)


@pytest.fixture
def staff_alice(alice):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    return alice


def test_the_servers_share_a_redis_cache():
    assert settings.CACHES["default"]["BACKEND"] == "prbench.cache.SharedRedisCache"
    assert settings.CACHES["default"]["LOCATION"] == settings.REDIS_URL


@pytest.mark.parametrize(
    "order",
    [
        pytest.param([0, 1] * 5, id="alternating"),
        # allauth's own limit is 5 per account per process: ten on one server would trip it
        # at the sixth; per-process counters would let the other server start again from 0.
        pytest.param([0] * 10, id="ten-on-one-then-the-other"),
    ],
)
def test_the_eleventh_wrong_password_is_refused_whichever_process_answers(alice, tmp_path, order):
    with two_servers(tmp_path) as ports:
        for port in ports:  # the right password works on both (and does not count as a failure)
            assert Browser().log_in(port, PASSWORD) == "signed in"
        attacker = Browser()

        answers = [attacker.log_in(ports[i], f"guess {n}") for n, i in enumerate(order)]
        assert answers == ["wrong"] * 10

        for port in (ports[1], ports[0]):
            assert attacker.log_in(port, "guess 11") == "refused"
            assert attacker.log_in(port, PASSWORD) == "refused"
            assert Browser().log_in(port, PASSWORD) == "refused"  # a fresh client is no way round


# Every one passes ALLOWED_HOSTS (127.0.0.1, localhost): Django ignores the port, the case and
# a trailing dot when it checks a host, but allauth used the Host as sent in its counter's key.
ROTATING_HOSTS = [f"127.0.0.1:{port}" for port in range(1000, 1008)] + ["localhost:8000", "LOCALHOST"]
FRESH_HOSTS = ["localhost.", "127.0.0.1:1014", HOST]


def test_no_host_header_starts_a_fresh_count(alice, tmp_path):
    """The attacker sends each guess with another Host, to each of two processes in turn: the
    account still locks after ten failures, whatever Host the next try names."""
    with two_servers(tmp_path) as ports:
        attacker = Browser()
        answers = []
        for n, host in enumerate(ROTATING_HOSTS):
            attacker.host = host
            answers.append(attacker.log_in(ports[n % 2], f"guess {n}"))
        assert answers == ["wrong"] * 10

        for n, host in enumerate(FRESH_HOSTS):
            attacker.host = host
            assert attacker.log_in(ports[n % 2], PASSWORD) == "refused", host
            assert Browser(host).log_in(ports[(n + 1) % 2], PASSWORD) == "refused", host


def test_the_admin_login_goes_through_the_same_limit(staff_alice, tmp_path):
    with two_servers(tmp_path) as ports:
        admin = Browser()
        status, location, _ = admin.request(ports[0], "GET", "/admin/login/?next=/admin/")
        assert (status, location) == (302, f"{LOGIN}?next=%2Fadmin%2F")
        assert admin.log_in(ports[1], PASSWORD, f"{LOGIN}?next=/admin/") == "signed in"
        assert admin.request(ports[0], "GET", "/admin/")[0] == 200

        attacker = Browser()
        answers = [attacker.log_in(ports[n % 2], f"guess {n}", f"{LOGIN}?next=/admin/") for n in range(10)]
        assert answers == ["wrong"] * 10

        for port in ports:
            assert attacker.log_in(port, PASSWORD, f"{LOGIN}?next=/admin/") == "refused"
            # The admin's own form no longer checks passwords: it sends everyone to allauth's.
            token = attacker.csrf_token(port)
            status, location, _ = attacker.request(
                port,
                "POST",
                "/admin/login/?next=/admin/",
                {"csrfmiddlewaretoken": token, "username": "alice@example.com", "password": PASSWORD},
            )
            assert (status, location) == (302, f"{LOGIN}?next=%2Fadmin%2F")
            assert "sessionid" not in attacker.cookies
            assert attacker.request(port, "GET", "/admin/")[0] == 302
