"""The run page's attempts list, its rows drawn in Python.

A page of 50 rows, each looked up and formatted field by field by the template engine, was
the largest part of the run page (issue 31): about fifteen lookups, filters and tags a row.
``attempt_rows`` writes the same HTML, byte for byte, from one format string; a guard test
(tests/experiments/test_attempt_rows.py) holds it to the loop the template had.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from prbench.formats import fixed_places

register = template.Library()

# One row as the template's loop drew it, whitespace included; every value escaped as the
# template escapes a variable.
ROW = (
    '\n      <tr><td class="num"><a href="{url}">{sequence}</a></td><td class="task"><a href="{task_url}">{task_label}'
    '</a></td><td>{arm}</td><td class="num">{repetition}</td>\n'
    '        <td><span class="status {status}">{status}</span>{cached}</td>\n'
    '        <td class="result">{result}</td>\n'
    '        <td class="num">{latency}</td><td class="num">{cost}</td><td class="num">{retries}</td></tr>\n    '
)
CACHED = ' <span class="flag" title="Reused a cached answer: no provider call">cached</span>'


@register.simple_tag
def attempt_rows(rows: list[Any]) -> SafeString:
    """The list's rows (attempts with ``url``, ``task_url``, ``task_label`` and ``result``
    set, as the run views set them)."""
    arms: dict[int, str] = {}  # a page's rows share a few arms: each label escaped once
    return mark_safe("".join(_row(row, arms) for row in rows))


def _row(row: Any, arms: dict[int, str]) -> str:
    status = conditional_escape(row.status)
    return ROW.format(
        url=conditional_escape(row.url),
        sequence=row.sequence,
        task_url=conditional_escape(row.task_url),
        task_label=conditional_escape(row.task_label),
        arm=_arm_label(row.arm, arms),
        repetition=row.repetition,
        status=status,
        cached=CACHED if row.response_cached else "",
        result=_result(row.result),
        latency="" if row.latency_ms is None else row.latency_ms,
        cost="" if row.cost_usd is None else f"${cost_cell(row.cost_usd)}",
        retries=row.retries,
    )


def _arm_label(arm: Any, arms: dict[int, str]) -> str:
    if arm.pk not in arms:
        arms[arm.pk] = conditional_escape(arm.shown_label)
    return arms[arm.pk]


def _result(said: Any) -> str:
    if not said.text:
        return ""
    tone = f' class="{conditional_escape(said.tone)}"' if said.tone else ""
    return f"<span{tone}>{conditional_escape(said.text)}</span>"


def cost_cell(value: Decimal) -> str:
    """A cost to five places, as ``floatformat:5`` prints it."""
    return fixed_places(value, 5)
