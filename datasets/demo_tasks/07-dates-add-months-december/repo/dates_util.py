"""Calendar arithmetic helpers built on :mod:`datetime`."""

from __future__ import annotations

import calendar
from datetime import date

__all__ = ["add_months", "end_of_month", "quarter_of"]


def end_of_month(day: date) -> date:
    """Return the last day of the month that contains ``day``."""
    last = calendar.monthrange(day.year, day.month)[1]
    return day.replace(day=last)


def add_months(day: date, months: int) -> date:
    """Return ``day`` shifted by ``months`` calendar months (may be negative).

    If the target month is shorter than ``day.day``, the result is clamped to
    the last day of that month: 31 January + 1 month is 28 (or 29) February.
    """
    total = day.month + months
    year = day.year + total // 12
    month = total % 12
    if month == 0:
        month = 12
    last = calendar.monthrange(year, month)[1]
    return date(year, month, min(day.day, last))


def quarter_of(day: date) -> int:
    """Return the calendar quarter (1-4) that ``day`` falls in."""
    return (day.month - 1) // 3 + 1
