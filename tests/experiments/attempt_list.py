"""Reading the run page's list of attempts (its own URL, paged, sorted and filtered) as the
tests that page through it do."""

from __future__ import annotations

import html
import re

from django.http import QueryDict
from django.urls import reverse

from experiments.attempt_list import SORT_FIELDS

NAVIGATE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "attempts"}


def live_url(run) -> str:
    return reverse("experiments:run", args=[run.code])


def list_url(run) -> str:
    return reverse("experiments:run_attempts", args=[run.code])


def shown(response) -> list[int]:
    """The sequences of the attempts the list shows, in its order."""
    return [int(n) for n in re.findall(r'<tr><td class="num"><a href="/attempts/[^"]+">(\d+)</a>', text(response))]


def link(response, rel: str) -> QueryDict | None:
    """The query its Previous ("prev") or Next link asks for; None when it has no such link."""
    found = re.search(rf'<a href="[^"?#]*\??([^"#]*)#attempts"[^>]* rel="{rel}">', text(response))
    return QueryDict(html.unescape(found[1])) if found else None


def text(response) -> str:
    return response.content.decode()


def expected_order(run, sort: str, **filters) -> list[int]:
    """The list's order, from the rows themselves: by the sort field in the asked direction,
    ties by sequence in the same direction, and rows without a value last."""
    field, descending = SORT_FIELDS[sort.lstrip("-")], sort.startswith("-")
    rows = list(run.attempts.filter(**filters).values("sequence", field))
    valued = sorted((r for r in rows if r[field] is not None), key=lambda r: (r[field], r["sequence"]))
    missing = sorted((r for r in rows if r[field] is None), key=lambda r: r["sequence"])
    if descending:
        valued.reverse()
        missing.reverse()
    return [r["sequence"] for r in valued + missing]


def pages_forward(client, run, params: dict) -> list[list[int]]:
    """Every page of the list, following its Next links from the first."""
    pages = []
    query: dict | QueryDict | None = params
    while query is not None:
        response = client.get(list_url(run), query, **NAVIGATE)
        assert response.status_code == 200
        pages.append(shown(response))
        query = link(response, "next")
    return pages
