"""Management commands as the tests run them: in this process (``run_command``, ``refused``),
or ``manage.py`` in a subprocess against the test database, as an operator would run it, where
what reaches the terminal (no traceback) and the exit status are what the tests check."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection


def run_command(*args: str) -> str:
    """What the command writes to stdout (its stderr kept off the test's output)."""
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue()


def refused(*args: str) -> str:
    """The CommandError's message; anything else (a traceback) fails the test."""
    with pytest.raises(CommandError) as caught:
        run_command(*args)
    return str(caught.value)


def run_manage(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="prbench.settings_test",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        REDIS_URL=settings.REDIS_URL,
    )
    manage = str(settings.BASE_DIR / "manage.py")
    return subprocess.run(
        [sys.executable, manage, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def assert_clean_refusal(result: subprocess.CompletedProcess[str], message: str) -> None:
    """Exit status 1 (a CommandError), the message on stderr, and no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stderr, result.stderr
