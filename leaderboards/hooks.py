"""How leaderboards plugs into experiments, which never imports it: receivers of the signals
by which experiments says a run's results changed (experiments/signals.py), each doing what
the sender called directly before, and the run's boards as experiments' pages, exports and
commands show them (experiments/board_views.py). Connected in LeaderboardsConfig.ready()."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from django.db import DatabaseError, transaction
from django.http import QueryDict

from experiments import signals
from experiments.board_views import register_board_views
from experiments.models import Run
from leaderboards import exports, pages, reporting
from leaderboards.jobs import queue_summary_refresh, request_summary_refresh
from leaderboards.summaries import fold_recorded

logger = logging.getLogger(__name__)


def refresh_recorded(sender: Any, run_ids: Iterable[int], **kwargs: Any) -> None:
    """Verdicts (recorded outside a fold) ask for a rebuild, throttled. An attempt job's
    recording is folded into the summaries as it commits (fold_chunk)."""
    request_summary_refresh(run_ids)


def fold_chunk(sender: Any, attempt_ids: list[int], **kwargs: Any) -> None:
    """In the recording's transaction. Summaries are derived data: a fold that fails is rolled
    back to its savepoint, logged, and the runs rebuilt once the recording commits; it never
    fails the recording."""
    try:
        with transaction.atomic():
            fold_recorded(attempt_ids)
    except DatabaseError:
        logger.exception("attempts %s not folded into their summaries; the runs are rebuilt", attempt_ids[:10])
        run_ids = set(Run.objects.filter(attempts__pk__in=attempt_ids).values_list("pk", flat=True))
        for run_id in sorted(run_ids):
            transaction.on_commit(functools.partial(queue_summary_refresh, run_id), robust=True)


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
    signals.chunk_recorded.connect(fold_chunk, dispatch_uid="leaderboards.fold_chunk")
    register_board_views(RunBoardViews())
