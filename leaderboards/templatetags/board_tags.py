"""Figures as the boards print them: a missing figure is a dash, an unknown price says so."""

from __future__ import annotations

from decimal import Decimal

from django import template
from django.template.defaultfilters import add
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from leaderboards.charts import DistributionRow
from prbench.formats import fixed_places

register = template.Library()
DASH = "\N{EM DASH}"


@register.filter
def percent(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value * 100:.{digits}f}%"


@register.filter
def percent_interval(interval: tuple[float, float] | None) -> str:
    if interval is None:
        return DASH
    return f"{interval[0] * 100:.1f}\N{EN DASH}{interval[1] * 100:.1f}%"


@register.filter
def number_interval(interval: tuple[float, float] | None, digits: int = 0) -> str:
    if interval is None:
        return DASH
    return f"{interval[0]:.{digits}f}\N{EN DASH}{interval[1]:.{digits}f}"


@register.filter
def money(value: Decimal | float | None, digits: int = 4) -> str:
    return "unknown" if value is None else f"${value:.{digits}f}"


@register.filter
def figure(value: float | None, digits: int = 1) -> str:
    """A count per something (turns per attempt, tokens per task): a dash when there is none."""
    return DASH if value is None else f"{value:,.{digits}f}"


@register.filter
def coordinate(value: float | Decimal) -> str:
    """A chart coordinate to a tenth, as ``floatformat:1`` prints it: a chart draws hundreds."""
    return fixed_places(value, 1)


BAR = '<rect class="bar" x="{}" y="{}" width="{}" height="{}"><title>{} of {} calls ({})</title></rect>'


@register.simple_tag
def latency_bars(row: DistributionRow, bar_width: float) -> SafeString:
    """A row of the latency chart's bars, as a loop over them in the template drew them
    (``bar_width|add:-2|coordinate``, counts as integers print); seven figures a bar, 88 bars,
    each looked up and formatted by the template engine cost a third of the run page's boards."""
    width = coordinate(add(bar_width, -2))
    bars = (
        (coordinate(b.x), coordinate(b.y), width, coordinate(b.height), b.count, row.total, percent(b.share))
        for b in row.bars
    )
    return format_html_join("", BAR, bars)
