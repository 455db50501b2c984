"""Conversion between integers and (standard, subtractive) Roman numerals."""

from __future__ import annotations

import re

__all__ = ["to_roman", "from_roman"]

_NUMERALS: tuple[tuple[int, str], ...] = (
    (1000, "M"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
)

_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}

_VALID = re.compile(r"^M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")


def to_roman(number: int) -> str:
    """Return the Roman numeral for ``number`` (1 to 3999 inclusive)."""
    if not isinstance(number, int) or isinstance(number, bool):
        raise TypeError("number must be an int")
    if not 1 <= number <= 3999:
        raise ValueError("number must be between 1 and 3999")
    parts = []
    for value, symbol in _NUMERALS:
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(numeral: str) -> int:
    """Parse a well-formed Roman numeral (case-insensitive) into an integer."""
    text = numeral.strip().upper()
    if not text or not _VALID.match(text):
        raise ValueError(f"invalid Roman numeral: {numeral!r}")
    total = 0
    largest_seen = 0
    for char in reversed(text):
        value = _VALUES[char]
        if value < largest_seen:
            total -= value
        else:
            total += value
            largest_seen = value
    return total
