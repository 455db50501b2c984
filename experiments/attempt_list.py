"""The attempts list of a run page: one page of a run's attempts, filtered and sorted.

Pages are cut by cursor (the sequence of the row a page starts after or ends before), never
by OFFSET, so a page deep into a million attempts costs what the first one costs: a page reads,
for each status and outcome class the filters allow, one range of an index on (run, status,
outcome, sort field, sequence) for as many rows as it shows, and merges them; the answered
attempts have an index of their own with their verdict after the class (resolved: true, false
or none), so that the wrong answers are a range too. An error category reads a partial index
of the failures on (run, error_category, status, outcome, sort field, sequence) the same way.

The list of every attempt in execution order, the run page's default, is one range of the
(run, sequence) index and needs no streams.

A task, or text in the question, is resolved to task ids from the dataset's tasks first (at
most ``QUESTION_TASKS``), and the streams are filtered to them: their attempts are few per
task (arms times repetitions), read through the (run, task, arm, repetition) index.

Text in the answer (the extracted answer) has no index that keeps the list's order on both
Postgres and SQLite, so a page searches a bounded window: the next ``SEARCH_WINDOW`` attempts
in the list's order, and shows those that match. A page that finds fewer than a page's worth
still links on, from the last attempt it read, so a search walks the run a window at a time
and no page costs more than a window, however large the run and however rare the text.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from operator import attrgetter
from typing import Any, NamedTuple
from urllib.parse import urlencode

from django.db import connections
from django.db.models import BooleanField, Case, Q, QuerySet, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Left

from evaluation.workloads.wording import ANSWER_CHARS, Said, Wording, task_label
from experiments.models import Attempt, AttemptStatus, Run
from providers.adapters.config import solver_label, solver_of
from providers.outcomes import OUTCOME_STATUSES

PAGE_SIZE = 50
SEARCH_WINDOW = 1000  # attempts an answer search reads for one page, at most
QUESTION_TASKS = 200  # tasks a question search lists the attempts of, at most
RESULTS = {"right": True, "wrong": False}  # the result filter: the verdict it lists
VERDICTS = (True, False, None)  # every value ``resolved`` can take: each its own index range
DEFAULT_SORT = "sequence"
# The sort keys a URL may name, and the column each one orders by.
SORT_FIELDS = {"sequence": "sequence", "latency": "latency_ms", "cost": "cost_usd", "status": "status"}
# What a row of the list shows, in ListedAttempt's order; the request, the answer and the
# logs stay in the database.
ROW_VALUES = (
    "pk",
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
    "outcome",
    "answer_start",
    "question_start",
    "expected_short",
)
TASK_VALUES = ("task__code", "task__external_id", "task__title")
ARM_VALUES = ("arm_id", "arm__label", "arm__config")  # its solver: an agent arm's label says so
LABEL_QUESTION_CHARS = 120  # of a question read for its task's label


@dataclass(frozen=True)
class AttemptQuery:
    """What the list shows, as its URL says it (see AttemptListForm)."""

    arm: str = ""  # an arm's label
    status: str = ""
    outcome: str = ""  # an outcome class (providers/outcomes.py)
    result: str = ""  # "right" or "wrong": answers graded so (a key of RESULTS)
    error: str = ""  # an error category (providers/errors.py)
    task: str = ""  # a task's external id
    question: str = ""  # text in the task's question
    answer: str = ""  # text in the extracted answer
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
            "result": changed.result,
            "error": changed.error,
            "task": changed.task,
            "question": changed.question,
            "answer": changed.answer,
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


NOT_SAID = Said("")


@dataclass(frozen=True)
class ListedTask:
    code: uuid.UUID
    external_id: str
    title: str


@dataclass(frozen=True)
class ListedArm:
    pk: int
    label: str
    config: dict[str, Any]

    @property
    def shown_label(self) -> str:
        return solver_label(self.label, solver_of(self.config))


@dataclass
class ListedAttempt:
    """A row of the list: the columns it shows, read as plain values (fifty attempts, their
    tasks and arms made into models cost twice the query), and what the views add to it."""

    pk: int
    code: uuid.UUID
    sequence: int
    repetition: int
    status: str
    response_cached: bool
    resolved: bool | None
    error_category: str
    patch_applied: bool | None
    patch_present: bool | None
    latency_ms: int | None
    cost_usd: Decimal | None
    retries: int
    outcome: str
    answer_start: str  # the start of its extracted answer
    question_start: str  # of its task's question
    expected_short: str  # its task's short right answer, for a kind that shows one
    task: ListedTask
    arm: ListedArm
    # Set by describe_rows and the views' _link_rows.
    result: Said = NOT_SAID
    task_label: str = ""
    url: str = ""
    task_url: str = ""


@dataclass(frozen=True)
class AttemptPage:
    rows: list[ListedAttempt]
    previous_before: int | None  # the previous page ends before this sequence; None: no previous page
    next_after: int | None  # the next page starts after this sequence; None: no next page
    searched: int = 0  # an answer search: the attempts this page read to find its rows

    @property
    def has_previous(self) -> bool:
        return self.previous_before is not None

    @property
    def has_next(self) -> bool:
        return self.next_after is not None


@dataclass(frozen=True)
class Scope:
    """What the form resolved the query's names to: the arm's id, and the tasks a task or
    question filter leaves (None: every task)."""

    arm_id: int | None = None
    task_ids: Sequence[int] | None = None


def attempt_page(run: Run, query: AttemptQuery, scope: Scope) -> AttemptPage:
    """The page of the run's attempts the query asks for."""
    if query.answer:
        return _search_page(run, query, scope)
    # The streams are read as plain tuples of their order's keys, and only the rows the page
    # shows are read whole: each stream gives up to a page's worth, most of which the merge drops.
    streams = _streams(query, scope, _keys(run))
    order = _segments(query.sort)
    if query.before is not None:
        rows = _read(streams, _reversed(order), _cursor(run, query.sort, query.before), PAGE_SIZE + 1)
        if len(rows) > PAGE_SIZE:
            shown = rows[PAGE_SIZE - 1 :: -1]
            return _found(run, shown, shown[0].sequence, shown[-1].sequence)
        query = replace(query, before=None)  # back at the start: show the first page, full
    cursor = None if query.after is None else _cursor(run, query.sort, query.after)
    rows = _read(streams, order, cursor, PAGE_SIZE + 1)
    shown = rows[:PAGE_SIZE]
    previous = shown[0].sequence if shown and cursor is not None else None
    return _found(run, shown, previous, shown[-1].sequence if len(rows) > PAGE_SIZE else None)


def _keys(run: Run, **annotations: Any) -> QuerySet[Any]:
    """The run's attempts as named tuples of their id and every sort key (and ``annotations``)."""
    return (
        run.attempts.annotate(**annotations)
        .values_list("pk", *dict.fromkeys(SORT_FIELDS.values()), *annotations, named=True)
        .order_by()
    )


def _rows(run: Run) -> QuerySet[Any]:
    """The rows as the list shows them: their columns, the start of each answer, and their
    tasks' words (each cut in the query: a patch or a long question is never read whole)."""
    return run.attempts.annotate(
        answer_start=Left("extracted_answer", ANSWER_CHARS + 1),
        question_start=Left("task__problem_statement", LABEL_QUESTION_CHARS),
        # A question kind keeps its short right answer under "answer" (a letter, a
        # response); the kinds that show none ignore it (Wording.expected_key).
        expected_short=Left(KeyTextTransform("answer", "task__payload"), ANSWER_CHARS + 1),
    ).values_list(*ROW_VALUES, *TASK_VALUES, *ARM_VALUES)


def _listed(values: tuple[Any, ...]) -> ListedAttempt:
    columns = dict(zip(ROW_VALUES, values, strict=False))
    # Left() of a null (no answer yet, no short answer) is null: the rows say "" as models did.
    for text in ("answer_start", "question_start", "expected_short"):
        columns[text] = columns[text] or ""
    task, arm = values[len(ROW_VALUES) : -len(ARM_VALUES)], values[-len(ARM_VALUES) :]
    return ListedAttempt(**columns, task=ListedTask(*task), arm=ListedArm(*arm))


def describe_rows(rows: list[ListedAttempt], words: Wording, inference_only: bool) -> list[ListedAttempt]:
    """Each row with its result and its task's label in the kind's words, for the template."""
    for row in rows:
        if not words.expected_key:
            row.expected_short = ""
        row.result = words.result(row, inference_only)
        row.task_label = task_label(words, row.task.external_id, row.task.title, row.question_start)
    return rows


def _search_page(run: Run, query: AttemptQuery, scope: Scope) -> AttemptPage:
    """A page of an answer search: the matches among the next SEARCH_WINDOW attempts past
    the cursor in the list's order (see the module's docstring). Only answered attempts
    have an answer to search."""
    if query.status not in ("", AttemptStatus.COMPLETED):
        return AttemptPage([], None, None)
    hit = When(extracted_answer__icontains=query.answer, then=Value(True))
    # A window is read as plain tuples of its order's keys, not as attempts: a thousand rows
    # made into model instances cost more than the query.
    keys = _keys(run, hit=Case(hit, default=Value(False), output_field=BooleanField()))
    streams = _streams(replace(query, status=AttemptStatus.COMPLETED), scope, keys)
    order = _segments(query.sort)
    if query.before is not None:
        window, more = _window(streams, _reversed(order), _cursor(run, query.sort, query.before))
        found = _hits(window)
        if len(found) > PAGE_SIZE:
            shown = found[PAGE_SIZE - 1 :: -1]
            return _found(run, shown, shown[0].sequence, shown[-1].sequence, window.index(shown[0]) + 1)
        if more:
            # Not a page's worth this far back: the page ends where it read, and leads on
            # past what it read (to the page it came from, when it found nothing).
            shown = found[::-1]
            onward = shown[-1].sequence if shown else window[0].sequence
            return _found(run, shown, window[-1].sequence, onward, len(window))
        query = replace(query, before=None)  # back at the start: search from there
    cursor = None if query.after is None else _cursor(run, query.sort, query.after)
    window, more = _window(streams, order, cursor)
    found = _hits(window)
    shown = found[:PAGE_SIZE]
    previous = None if cursor is None or not window else (shown or window)[0].sequence
    if len(found) > PAGE_SIZE:
        return _found(run, shown, previous, shown[-1].sequence, window.index(shown[-1]) + 1)
    # Links on only while there is more to read: no page leads to an empty one.
    return _found(run, shown, previous, window[-1].sequence if more else None, len(window))


def _window(streams: list[_Stream], order: list[_Segment], cursor: dict | None) -> tuple[list[Any], bool]:
    """The next SEARCH_WINDOW rows past the cursor, and whether more follow."""
    rows = _read(streams, order, cursor, SEARCH_WINDOW + 1)
    return rows[:SEARCH_WINDOW], len(rows) > SEARCH_WINDOW


def _hits(window: list[Any]) -> list[Any]:
    return [row for row in window if row.hit]


def _found(run: Run, keys: list[Any], previous: int | None, following: int | None, searched: int = 0) -> AttemptPage:
    """The page's rows, read whole by their ids (a page's worth at most), in ``keys``' order."""
    by_pk = {row.pk: row for row in map(_listed, _rows(run).filter(pk__in=[key.pk for key in keys]))} if keys else {}
    return AttemptPage([by_pk[key.pk] for key in keys], previous, following, searched)


class _Stream(NamedTuple):
    rows: QuerySet[Any]
    # Read from the answered attempts' index, whose sort columns come after the verdict: the
    # verdict the stream holds (resolved true, false or null) leads its ORDER BY too (see
    # _stretches).
    by_verdict: bool = False


def _streams(query: AttemptQuery, scope: Scope, attempts: QuerySet[Any]) -> list[_Stream]:
    """The filtered attempts, one queryset per status, outcome class and (answered) verdict
    they can have. Each is read from its own range of an index led by (run, status,
    outcome), or (run, outcome, resolved) for the answered, so no filter makes Postgres wade
    through other rows: queued attempts all sit at the end of the execution order, failed
    ones have no latency or cost, which a plain (run, latency) index would read past one by
    one to find none, and a good arm's few wrong answers sit among its many right ones."""
    if _in_execution_order(query, scope):
        return [_Stream(attempts)]
    if scope.arm_id is not None:
        attempts = attempts.filter(arm_id=scope.arm_id)
    if scope.task_ids is not None:
        attempts = attempts.filter(task_id__in=scope.task_ids)
    statuses = [query.status] if query.status else list(AttemptStatus.values)
    if query.result:
        statuses = [status for status in statuses if status == AttemptStatus.COMPLETED]
    verdicts: tuple[bool | None, ...] = (RESULTS[query.result],) if query.result else VERDICTS
    return [
        _Stream(
            attempts.filter(_range(query.error, status, verdict), status=status, outcome=outcome),
            by_verdict=verdict is not ANY,
        )
        for status in statuses
        for outcome in STATUS_OUTCOMES[status]
        if not query.outcome or outcome == query.outcome
        for verdict in (verdicts if status == AttemptStatus.COMPLETED and not query.error else (ANY,))
    ]


def _in_execution_order(query: AttemptQuery, scope: Scope) -> bool:
    """Whether the list is every attempt in execution order (the run page's default): one
    range of the (run, sequence) index gives it, with no stream to merge."""
    filtered = query.status or query.outcome or query.result or query.error or scope != Scope()
    return not filtered and SORT_FIELDS[query.sort.lstrip("-")] == "sequence"


ANY = object()  # no condition on the verdict


def _range(error: str, status: str, verdict: object) -> Q:
    """The rest of a stream's conditions, as its partial index's: an error category's, the
    answered attempts' (by verdict) or the others'. Each index's own condition is said
    outright, though the stream's status or category implies it: SQLite only uses a partial
    index when the query repeats its condition."""
    if error:
        return ~Q(error_category="") & Q(error_category=error)
    if status != AttemptStatus.COMPLETED:
        return ~Q(status=AttemptStatus.COMPLETED)
    return Q(resolved__isnull=True) if verdict is None else Q(resolved=verdict)


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
    # The order the query asks for, when it is not ``order``: the rows without a value ask
    # for (field, sequence), the same order since the field is null in all of them, because
    # that is the order of the index that holds them and the planner cannot tell a column
    # that IS NULL is constant: asked for sequence alone, it may walk the sequence index
    # instead, past every row of the stream that has a value, to find the few without.
    index_order: tuple[str, ...] = ()

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
        _Segment(field, True, Q(**{f"{field}__isnull": True}), (sign + "sequence",), (sign + field, sign + "sequence")),
    ]


def _reversed(segments: list[_Segment]) -> list[_Segment]:
    flip = lambda names: tuple(name[1:] if name.startswith("-") else "-" + name for name in names)  # noqa: E731
    return [replace(s, order=flip(s.order), index_order=flip(s.index_order)) for s in reversed(segments)]


def _cursor(run: Run, sort: str, sequence: int) -> dict[str, Any]:
    """The sequence and sort value of the attempt a page starts after or ends before (the
    form checked that it exists)."""
    return run.attempts.values("sequence", SORT_FIELDS[sort.lstrip("-")]).get(sequence=sequence)


def _read(streams: list[_Stream], segments: list[_Segment], cursor: dict | None, limit: int) -> list[Any]:
    """Up to ``limit`` rows in the segments' order from just past the cursor (or the start):
    as many from each stream, put in order together. Where the database can order and limit
    each arm of a UNION ALL (Postgres), every stretch of every stream is read in that one
    query; elsewhere (SQLite) each stream is read by itself, a stretch at a time."""
    stretches = [_stretches(stream, segments, cursor, limit) for stream in streams]
    every = [stretch for stream in stretches for stretch in stream]
    if not every:
        return []
    if connections[every[0].db].features.supports_slicing_ordering_in_compound:
        first, *rest = every
        rows = list(first.union(*rest, all=True)) if rest else list(first)
    else:
        rows = [row for stream in stretches for row in _walk(stream, limit)]
    return _in_order(rows, segments)[:limit]


def _stretches(stream: _Stream, segments: list[_Segment], cursor: dict | None, limit: int) -> list[QuerySet[Any]]:
    """One stream's stretches past the cursor, in the segments' order: each up to ``limit``
    rows of one segment, in its index's order. A stream of answered attempts orders by its
    verdict first, a constant in it, as the index does: the planner takes ``resolved IS
    NULL`` for a range, not a constant, so asked for the sort columns alone it cannot see that
    the index gives them in order, and once statistics said a few rows had no verdict, it
    walked the (run, status, sequence) index instead, past 900,000 answered attempts to
    find none (1.2 s for the first page of a million)."""
    stretches = []
    for segment in segments:
        if cursor is not None:
            if not segment.holds(cursor[segment.field]):
                continue  # the cursor lies in a later segment
            stretch = stream.rows.filter(segment.where, _past(segment.order, cursor))
            cursor = None  # the segments after it are read from their start
        else:
            stretch = stream.rows.filter(segment.where)
        order = segment.index_order or segment.order
        if stream.by_verdict:
            order = (("-" if order[0].startswith("-") else "") + "resolved", *order)
        stretches.append(stretch.order_by(*order)[:limit])
    return stretches


def _walk(stretches: list[QuerySet[Any]], limit: int) -> list[Any]:
    """Up to ``limit`` rows of one stream: its stretches read in turn until that many."""
    rows: list[Any] = []
    for stretch in stretches:
        rows += stretch[: limit - len(rows)]
        if len(rows) == limit:
            break
    return rows


def _in_order(rows: list[Any], segments: list[_Segment]) -> list[Any]:
    """The rows in the segments' order, as Postgres ordered each stream."""
    ordered: list[Any] = []
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
    if page and page.previous_before is not None:
        links["previous"] = query.query_string(after=None, before=page.previous_before)
    if page and page.next_after is not None:
        links["next"] = query.query_string(after=page.next_after, before=None)
    return links
