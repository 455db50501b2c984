"""The leaderboards app's step of the recovery sweep (prbench/recovery.py)."""

from __future__ import annotations

from datetime import timedelta

from leaderboards.jobs import refresh_out_of_date


def refresh_stale_boards(stale_after: timedelta) -> dict[str, int]:
    """``summaries``: runs recorded into since their boards' last refresh, refreshed now
    (every run marked out of date, whatever its age: ``stale_after`` is not its to use)."""
    return {"summaries": len(refresh_out_of_date())}
