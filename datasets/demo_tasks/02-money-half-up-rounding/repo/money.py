"""Money helpers that work in integer minor units (cents)."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

__all__ = ["to_cents", "format_cents", "apply_discount"]

_CENT = Decimal("0.01")
_UNIT = Decimal("1")


def _round(value: Decimal, exponent: Decimal) -> Decimal:
    """Round ``value`` to ``exponent`` using commercial rounding.

    Halves are rounded away from zero, so ``1.005`` becomes ``1.01`` and
    ``-1.005`` becomes ``-1.01``.
    """
    return value.quantize(exponent, rounding=ROUND_HALF_EVEN)


def to_cents(amount: str | int | Decimal) -> int:
    """Parse ``amount`` (in major units, e.g. dollars) into integer cents."""
    try:
        value = Decimal(str(amount).strip())
    except InvalidOperation as exc:
        raise ValueError(f"invalid amount: {amount!r}") from exc
    if not value.is_finite():
        raise ValueError(f"invalid amount: {amount!r}")
    return int(_round(value, _CENT) * 100)


def format_cents(cents: int, currency: str = "$") -> str:
    """Render ``cents`` as a string such as ``"$1,234.50"`` or ``"-$0.05"``."""
    sign = "-" if cents < 0 else ""
    major, minor = divmod(abs(cents), 100)
    return f"{sign}{currency}{major:,}.{minor:02d}"


def apply_discount(cents: int, percent: int | str | Decimal) -> int:
    """Return ``cents`` reduced by ``percent`` percent, rounded to whole cents."""
    pct = Decimal(str(percent))
    if not Decimal(0) <= pct <= Decimal(100):
        raise ValueError("percent must be between 0 and 100")
    discounted = Decimal(cents) * (Decimal(100) - pct) / Decimal(100)
    return int(_round(discounted, _UNIT))
