from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from leaderboards.boards import BOARD_NAMES
from leaderboards.pages import one_board, pairwise_page
from orgs.access import access_run


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@login_required
def run_board(request: HtmxHttpRequest, code: str, board: str) -> HttpResponse:
    """One of the run's boards on its own page, sorted by ?sort=column (-column: descending)."""
    run = access_run(request, code)
    if board not in BOARD_NAMES:
        raise Http404("no such board")
    context = {
        "run": run,
        "name": board,
        "sort_target": f"#board-{board}",
        **one_board(run, board, request.GET.get("sort", "")),
    }
    template = "leaderboards/run_board.html#board" if request.htmx else "leaderboards/run_board.html"
    return render(request, template, context)


@login_required
def run_pairwise(request: HttpRequest, code: str) -> HttpResponse:
    run = access_run(request, code)
    return render(request, "leaderboards/pairwise.html", {"run": run, **pairwise_page(run)})
