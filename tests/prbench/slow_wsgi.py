"""A WSGI app whose one response takes longer than the gunicorn timeout the config test sets:
``SLOW_CHUNKS`` lines, one a second (tests/prbench/test_gunicorn_config.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

SLOW_CHUNKS = 5


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _lines()


def _lines() -> Iterator[bytes]:
    for number in range(SLOW_CHUNKS):
        time.sleep(1)
        yield f"line {number}\n".encode()
