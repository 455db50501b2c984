"""Resolution of RFC 6901 JSON Pointers against decoded JSON documents."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["JsonPointerError", "parse_pointer", "resolve"]

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")


class JsonPointerError(LookupError):
    """Raised when a pointer is malformed or does not match the document."""


def _unescape(token: str) -> str:
    """Decode the ``~0`` and ``~1`` escape sequences of a reference token."""
    return token.replace("~0", "~").replace("~1", "/")


def parse_pointer(pointer: str) -> list[str]:
    """Split ``pointer`` into its unescaped reference tokens.

    The empty string refers to the whole document; any other pointer must
    start with ``/``.
    """
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise JsonPointerError(f"pointer must start with '/': {pointer!r}")
    return [_unescape(token) for token in pointer[1:].split("/")]


def resolve(document: Any, pointer: str) -> Any:
    """Return the value inside ``document`` that ``pointer`` refers to."""
    current = document
    for token in parse_pointer(pointer):
        if isinstance(current, dict):
            if token not in current:
                raise JsonPointerError(f"key not found: {token!r}")
            current = current[token]
        elif isinstance(current, list):
            if not _ARRAY_INDEX.fullmatch(token):
                raise JsonPointerError(f"invalid array index: {token!r}")
            index = int(token)
            if index >= len(current):
                raise JsonPointerError(f"array index out of range: {index}")
            current = current[index]
        else:
            raise JsonPointerError(f"cannot descend into {type(current).__name__}")
    return current
