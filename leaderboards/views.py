from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from experiments.access import access_run
from leaderboards.boards import BOARD_NAMES
from leaderboards.forms import CrossRunForm
from leaderboards.pages import cross_run_page, one_board, pairwise_page, versus_page
from orgs.access import access_current_org


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
    if context["board"] is None and board != "quality":  # the evaluator's, for a kind it never judges
        raise Http404("no such board for this run's kind")
    template = "leaderboards/run_board.html#board" if request.htmx else "leaderboards/run_board.html"
    return render(request, template, context)


@login_required
def run_pairwise(request: HttpRequest, code: str) -> HttpResponse:
    run = access_run(request, code)
    return render(request, "leaderboards/pairwise.html", {"run": run, **pairwise_page(run)})


@login_required
def org_board(request: HttpRequest) -> HttpResponse:
    """The organisation's quality board over chosen runs of one dataset, and each arm's trend."""
    membership = access_current_org(request)
    form = CrossRunForm(request.GET or None, request=request, org=membership.org)
    context = {"form": form, **(cross_run_page(form.cleaned_data["selected"]) if form.is_valid() else {})}
    return render(request, "leaderboards/crossrun.html", context)


@login_required
def run_versus(request: HttpRequest, code: str, other: str) -> HttpResponse:
    """Run A against run B, task by task; both of one dataset."""
    a, b = access_run(request, code), access_run(request, other)
    return render(request, "leaderboards/versus.html", {"a": a, "b": b, **versus_page(a, b)})
