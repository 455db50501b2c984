"""How leaderboards plugs into experiments, which never imports it: receivers of the signals
by which experiments says a run's results changed (experiments/signals.py), each doing what
the sender called directly before, and the run's boards as experiments' pages, exports and
commands show them (experiments/board_views.py). Connected in LeaderboardsConfig.ready()."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import QueryDict

from experiments import signals
from experiments.board_views import register_board_views
from experiments.models import Run
from leaderboards import exports, pages, reporting
from leaderboards.jobs import queue_summary_refresh, request_summary_refresh


def refresh_recorded(sender: Any, run_ids: Iterable[int], in_this_job: bool = False, **kwargs: Any) -> None:
    request_summary_refresh(run_ids, in_this_job=in_this_job)


def refresh_changed(sender: Any, run_id: int, **kwargs: Any) -> None:
    queue_summary_refresh(run_id)


class RunBoardViews:
    def page_section(self, run: Run, path: str, query: QueryDict) -> dict[str, Any]:
        return pages.run_page_boards(run, path, query)

    def summary(self, run: Run) -> dict:
        return exports.run_summary(run)

    def html_report(self, run: Run) -> str:
        return exports.html_report(run)

    def board_text(self, run: Run) -> str:
        return reporting.run_board_text(run)

    def evaluator_text(self, run: Run) -> str:
        return reporting.evaluator_summary(run)


def connect() -> None:
    signals.results_recorded.connect(refresh_recorded, dispatch_uid="leaderboards.refresh_recorded")
    signals.run_changed.connect(refresh_changed, dispatch_uid="leaderboards.refresh_changed")
    register_board_views(RunBoardViews())
