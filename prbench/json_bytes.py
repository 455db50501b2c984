"""JSON for the hot path's writes, as UTF-8 bytes, by orjson (issue 31).

orjson encodes in Rust straight to bytes, at about an eighth of ``json.dumps``' CPU. What it
refuses (an integer beyond 64 bits, a key that is not a string, nesting past 254 levels, a
string that is not valid Unicode) goes through ``json.dumps``, so a value the standard library
wrote is still written, and one it refused is still refused with its TypeError. Times and
dataclasses go to ``default`` as they would with ``json.dumps``. One difference: a NaN or an
infinity is written as null (JSON has no such number; ``json.dumps`` wrote a token Postgres
refuses and most readers too)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def json_bytes(value: Any, default: Callable[[Any], Any] | None = None) -> bytes | str:
    """``value`` as compact JSON: bytes from orjson, or str from json.dumps where orjson refuses it."""
    try:
        return orjson.dumps(value, default=default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=default)
