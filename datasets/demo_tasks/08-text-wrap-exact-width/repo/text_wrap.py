"""Greedy word wrapping for plain-text output such as CLI help screens."""

from __future__ import annotations

__all__ = ["wrap", "fill"]


def wrap(text: str, width: int = 70) -> list[str]:
    """Split ``text`` into lines of at most ``width`` characters.

    Words are separated by any run of whitespace and are packed greedily.
    A word is only split when it is longer than ``width`` on its own, in
    which case it is broken into ``width``-sized chunks.
    """
    if width < 1:
        raise ValueError("width must be positive")
    lines: list[str] = []
    current = ""
    for word in text.split():
        while len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if not current:
            current = word
        elif len(current) + 1 + len(word) < width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def fill(text: str, width: int = 70) -> str:
    """Like :func:`wrap`, but return a single newline-separated string."""
    return "\n".join(wrap(text, width))
