"""The attempts list of a run page: one page of a run's attempts, filtered and sorted.

Pages are cut by cursor (the sequence of the row a page starts after or ends before), never
by OFFSET, so a page deep into a million attempts costs what the first one costs: a page reads,
for each status and outcome class the filters allow, one range of an index on (run, status,
outcome, sort field, sequence) for as many rows as it shows, and merges them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q, QuerySet

from experiments.models import Attempt, AttemptStatus, Run
from providers.outcomes import OUTCOME_STATUSES

PAGE_SIZE = 50
DEFAULT_SORT = "sequence"
# The sort keys a URL may name, and the column each one orders by.
SORT_FIELDS = {"sequence": "sequence", "latency": "latency_ms", "cost": "cost_usd", "status": "status"}
# What a row of the list shows; the request, the answer and the logs stay in the database.
ROW_FIELDS = (
    "run",  # the related manager sets each row's run: without its id Django fetches one
    "code",
    "sequence",
    "repetition",
    "status",
    "response_cached",
    "resolved",
    "error_category",
    "patch_applied",
    "patch_present",
    "latency_ms",
    "cost_usd",
    "retries",
    "task__code",
    "task__external_id",
    "arm__label",
)


@dataclass(frozen=True)
class AttemptQuery:
    """What the list shows, as its URL says it (see AttemptListForm)."""

    arm: str = ""  # an arm's label
    status: str = ""
    outcome: str = ""  # an outcome class (providers/outcomes.py)
    sort: str = DEFAULT_SORT  # a key of SORT_FIELDS, with "-" in front for descending
    after: int | None = None  # the sequence of the attempt this page starts after
    before: int | None = None  # the sequence of the attempt this page ends before

    def query_string(self, **changes: Any) -> str:
        """This query with ``changes``, as a URL's query string ("" when all is default):
        what every link of the list carries, so a page can be shared and the back button
        returns to it."""
        changed = replace(self, **changes)
        params = {
            "arm": changed.arm,
            "status": changed.status,
            "outcome": changed.outcome,
            "sort": "" if changed.sort == DEFAULT_SORT else changed.sort,
            "after": "" if changed.after is None else changed.after,
            "before": "" if changed.before is None else changed.before,
        }
        encoded = urlencode({name: value for name, value in params.items() if value != ""})
        return f"?{encoded}" if encoded else ""

    def heading(self, key: str) -> SortHeading:
        """A column heading's link: sort by it, or reverse it when it already sorts the
        list; from the first page either way."""
        direction = {key: "ascending", f"-{key}": "descending"}.get(self.sort, "")
        sort = f"-{key}" if direction == "ascending" else key
        return SortHeading(self.query_string(sort=sort, after=None, before=None), direction)


@dataclass(frozen=True)
class SortHeading:
    query_string: str
    direction: str  # how the column sorts the list now: ascending, descending, or "" (it does not)


@dataclass(frozen=True)
class AttemptPage:
    rows: list[Attempt]
    has_previous: bool
    has_next: bool


def attempt_page(run: Run, query: AttemptQuery, arm_id: int | None) -> AttemptPage:
    """The page of the run's attempts the query asks for. ``arm_id`` is the arm the query's
    label names (the form resolved it), so the filter is on the attempts' own column."""
    streams = _streams(run, query, arm_id)
    order = _segments(query.sort)
    if query.before is not None:
        rows = _read(streams, _reversed(order), _cursor(run, query.sort, query.before), PAGE_SIZE + 1)
        if len(rows) > PAGE_SIZE:
            return AttemptPage(rows[PAGE_SIZE - 1 :: -1], has_previous=True, has_next=True)
        query = replace(query, before=None)  # back at the start: show the first page, full
    cursor = None if query.after is None else _cursor(run, query.sort, query.after)
    rows = _read(streams, order, cursor, PAGE_SIZE + 1)
    return AttemptPage(rows[:PAGE_SIZE], has_previous=cursor is not None, has_next=len(rows) > PAGE_SIZE)


def _streams(run: Run, query: AttemptQuery, arm_id: int | None) -> list[QuerySet[Attempt]]:
    """The filtered attempts, one queryset per status they can have. Each is read from its
    own range of an index led by (run, status), so no filter makes Postgres wade through
    other statuses' rows: queued attempts all sit at the end of the execution order, and
    failed ones have no latency or cost, which a plain (run, latency) index would read past
    one by one to find none."""
    attempts = run.attempts.select_related("task", "arm").only(*ROW_FIELDS)
    if arm_id is not None:
        attempts = attempts.filter(arm_id=arm_id)
    statuses = [query.status] if query.status else list(AttemptStatus.values)
    return [
        attempts.filter(status=status, outcome=outcome)
        for status in statuses
        for outcome in STATUS_OUTCOMES[status]
        if not query.outcome or outcome == query.outcome
    ]


# The outcome classes an attempt of each status can have ("": none yet, or cancelled). A
# stream per (status, class) keeps a rare class, such as the harness failures among a million
# answered attempts, one short index range away instead of a filter over all of them.
STATUS_OUTCOMES: dict[str, tuple[str, ...]] = {
    status: tuple(outcome for outcome, statuses in OUTCOME_STATUSES.items() if status in statuses) or ("",)
    for status in AttemptStatus.values
}


@dataclass(frozen=True)
class _Segment:
    """A stretch of the list's order that one index range gives: the rows with a value of
    the sort field, ordered by it and then by sequence, or the rows without one (not answered
    yet, or failed), ordered by sequence."""

    field: str  # the sort field
    without_value: bool
    where: Q
    order: tuple[str, ...]  # field names, "-" in front for descending

    def holds(self, value: Any) -> bool:
        """Whether a row with this value of the sort field lies in the segment."""
        return (value is None) == self.without_value


def _segments(sort: str) -> list[_Segment]:
    """The whole order of the list: rows without a value come last whichever the direction."""
    sign = "-" if sort.startswith("-") else ""
    field = SORT_FIELDS[sort.lstrip("-")]
    if field == "sequence":
        return [_Segment(field, False, Q(), (sign + field,))]
    if not Attempt._meta.get_field(field).null:
        return [_Segment(field, False, Q(), (sign + field, sign + "sequence"))]
    return [
        _Segment(field, False, Q(**{f"{field}__isnull": False}), (sign + field, sign + "sequence")),
        _Segment(field, True, Q(**{f"{field}__isnull": True}), (sign + "sequence",)),
    ]


def _reversed(segments: list[_Segment]) -> list[_Segment]:
    flip = lambda name: name[1:] if name.startswith("-") else "-" + name  # noqa: E731
    return [replace(s, order=tuple(flip(name) for name in s.order)) for s in reversed(segments)]


def _cursor(run: Run, sort: str, sequence: int) -> dict[str, Any]:
    """The sequence and sort value of the attempt a page starts after or ends before (the
    form checked that it exists)."""
    return run.attempts.values("sequence", SORT_FIELDS[sort.lstrip("-")]).get(sequence=sequence)


def _read(streams: list[QuerySet[Attempt]], segments: list[_Segment], cursor: dict | None, limit: int) -> list[Attempt]:
    """Up to ``limit`` rows in the segments' order from just past the cursor (or the start):
    as many from each stream, put in order together."""
    rows = [row for stream in streams for row in _walk(stream, segments, cursor, limit)]
    return _in_order(rows, segments)[:limit]


def _walk(attempts: QuerySet[Attempt], segments: list[_Segment], cursor: dict | None, limit: int) -> list[Attempt]:
    """Up to ``limit`` rows of one stream in the segments' order, from just past the cursor."""
    rows: list[Attempt] = []
    for segment in segments:
        if cursor is not None:
            if not segment.holds(cursor[segment.field]):
                continue  # the cursor lies in a later segment
            stretch = attempts.filter(segment.where, _past(segment.order, cursor))
            cursor = None  # the segments after it are read from their start
        else:
            stretch = attempts.filter(segment.where)
        rows += stretch.order_by(*segment.order)[: limit - len(rows)]
        if len(rows) == limit:
            break
    return rows


def _in_order(rows: list[Attempt], segments: list[_Segment]) -> list[Attempt]:
    """The rows in the segments' order, as Postgres ordered each stream."""
    ordered: list[Attempt] = []
    for segment in segments:
        stretch = [row for row in rows if segment.holds(getattr(row, segment.field))]
        for name in reversed(segment.order):  # stable sorts, the last key first
            stretch.sort(key=attrgetter(name.lstrip("-")), reverse=name.startswith("-"))
        ordered += stretch
    return ordered


BEYOND = {False: ("gt", "gte"), True: ("lt", "lte")}  # by descending: strictly, or at or beyond


def _past(order: tuple[str, ...], cursor: dict[str, Any]) -> Q:
    """Rows after the cursor in this order. With a tie-breaker, the first key's bound comes
    alone as well (at or beyond the cursor's value), so Postgres reads the index from there;
    the rest only drops the ties up to the cursor."""
    (first, descending), *tie = [(name.lstrip("-"), name.startswith("-")) for name in order]
    strictly, at_or = BEYOND[descending]
    after_first = Q(**{f"{first}__{strictly}": cursor[first]})
    if not tie:
        return after_first
    [(second, second_descending)] = tie
    after_tie = Q(**{f"{second}__{BEYOND[second_descending][0]}": cursor[second]})
    return Q(**{f"{first}__{at_or}": cursor[first]}) & (after_first | after_tie)


def page_links(query: AttemptQuery, page: AttemptPage | None) -> dict[str, Any]:
    """The query strings the list's links carry: this page (what its refresh fetches), the
    first, previous and next pages, and each column heading's sort."""
    links: dict[str, Any] = {
        "current": query.query_string(),
        "first": query.query_string(after=None, before=None),
        "sort": {key: query.heading(key) for key in SORT_FIELDS},
    }
    if page and page.rows:
        links["previous"] = query.query_string(after=None, before=page.rows[0].sequence)
        links["next"] = query.query_string(after=page.rows[-1].sequence, before=None)
    return links
