"""Numbers as the site's templates print them, without the template engine's cost."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any


def fixed_places(value: Any, places: int) -> str:
    """What ``floatformat:places`` prints (half up, from the number's shortest repr; never
    "-0.0"), which costs ten times as much for going through the locale's number formats.
    The site has one language (en-gb: a point, no grouping), and SVG wants a point whatever
    the language."""
    try:
        number = Decimal(str(value))
    except InvalidOperation:  # not a number at all (None, ""): nothing, as floatformat prints
        return ""
    if not number.is_finite():
        return str(value)  # "nan", "inf", as floatformat prints them
    rounded = number.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
    return f"{rounded if rounded else abs(rounded):f}"
