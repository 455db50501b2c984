"""A run's HTML report: one file to share that opens offline. Its stylesheet is inlined, its
charts are inline SVG, and it has no script and no link, so nothing loads from anywhere. It
holds what the run page's boards hold (the boards, reliability, charts, pairwise verdicts and
ratings), read from the run's summaries, never from its attempts' text: no answer and no
evaluator rationale can reach it, as the summaries hold neither (pass@k, for code, counts
attempts per task and reads nothing else of them)."""

from __future__ import annotations

import tomllib
from functools import cache

from django.conf import settings
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from experiments.models import Run
from leaderboards.boards import run_boards
from leaderboards.charts import cost_quality, latency_distribution
from leaderboards.pages import pairwise_page, pass_at_k_table

STYLESHEETS = ("prbench/app.css", "prbench/report.css")


def run_report(run: Run) -> str:
    """The report as one HTML document. The same run renders the same document, its line
    "Generated ..." apart, until the run's summaries are refreshed."""
    boards = run_boards(run, {}, lambda board, sort: "")  # no sort links: a file cannot re-sort itself
    context = {
        "run": run,
        "dataset": run.experiment.dataset,
        "arms": run.arms.order_by("position", "pk"),
        "boards": boards,
        "cost_quality": cost_quality(boards),
        "latency": latency_distribution(boards),
        **pairwise_page(run),
        "pass_at_k": pass_at_k_table(run),
        "stylesheet": inlined_stylesheet(),
        "version": prbench_version(),
        "commit": settings.PRBENCH_COMMIT,
        "generated_at": timezone.now(),
    }
    return render_to_string("leaderboards/report.html", context)


def inlined_stylesheet() -> SafeString:
    """The site's stylesheet and the report's own rules, to go inside the report's <style>."""
    texts = []
    for name in STYLESHEETS:
        path = finders.find(name)
        if path is None:
            raise LookupError(f"static file {name} not found")
        with open(path, encoding="utf-8") as css:
            texts.append(css.read())
    return mark_safe("\n".join(texts))  # our own files; no "</style>" in them


@cache
def prbench_version() -> str:
    with open(settings.BASE_DIR / "pyproject.toml", "rb") as project:
        return tomllib.load(project)["project"]["version"]
