"""What experiments shows of a run's boards, drawn by the floor above it.

The boards are leaderboards' (summaries, rankings, charts, the HTML report), and leaderboards
imports experiments, never the reverse: it registers the one ``BoardViews`` in its
AppConfig.ready(), and experiments' run page, exports and commands call through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from django.http import QueryDict

    from experiments.models import Run


class BoardViews(Protocol):
    def page_section(self, run: Run, path: str, query: QueryDict) -> dict[str, Any]:
        """The run page's boards and charts, sorted as its ``query`` asks: template context (their
        HTML as ``boards_section``)."""
        ...

    def summary(self, run: Run) -> dict:
        """The run and each arm's figures on its boards: the JSON export's head."""
        ...

    def html_report(self, run: Run) -> str:
        """The run's self-contained HTML report."""
        ...

    def board_text(self, run: Run) -> str:
        """The run's quality board as the command line prints it."""
        ...

    def evaluator_text(self, run: Run) -> str:
        """The evaluator's scores of each arm as the command line prints them."""
        ...


_registered: BoardViews | None = None


def register_board_views(views: BoardViews) -> None:
    global _registered
    _registered = views


def board_views() -> BoardViews:
    if _registered is None:
        raise RuntimeError("no app registered the run boards (is leaderboards in INSTALLED_APPS?)")
    return _registered
