"""A run's summaries (leaderboards/models.py), kept as its attempts are recorded and rebuilt in SQL.

Recording folds each chunk of attempts into them in its own transaction (``fold_recorded``):
one aggregate over the chunk's rows, one upsert of its (arm, task) counts and one of its arms'
counts, sums and sketches, added to what is there. So a board read after a chunk commits
counts it, and folding costs the chunk's size, not the run's.

``refresh_run_summaries`` rebuilds them from scratch, for ``recompute_leaderboards``, a run
changed as a whole (re-priced, retried, finished) and a reader that finds them stale: a
GROUP BY over the run's attempts per kind of summary whatever its size, each one scan (the
arms' totals per group of attempts alike for every filter they count with, the (arm, task)
counts, the sketches' buckets), and one over its verdicts. Outside a caller's transaction,
the arms' totals are read on a second connection, in a snapshot the rebuild's exports,
while its own counts the rest.
Folds and rebuilds of a run take turns (take_refresh_turn): folds share the turn, a rebuild
has it alone, so it never writes over a fold it did not read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from evaluation.models import Verdict
from experiments.models import Attempt, Run, RunArm
from leaderboards import sketches
from leaderboards.aggregation import (
    COUNTED_BY_KEY,
    LATENCY_BUCKETS_MS,
    MODEL_SCORED,
    TOTAL,
    GroupedTotals,
    additive_totals,
    attempts_fingerprint,
    evaluator_interval,
    evaluator_totals,
    keyed_counts,
    latency_bucket,
    sketch_buckets,
)
from leaderboards.models import ArmEvaluatorSummary, ArmSummary, TaskSummary
from leaderboards.sql import BucketCounts, Collect

TASK_SUMMARY_COLUMNS = ("run_id", "arm_id", "task_id", "scored", "successes")
SKETCHES = tuple(sketch_buckets())


def refresh_run_summaries(
    run_id: int, on_locked: Callable[[], object] | None = None, *, if_stale: bool = False
) -> bool:
    """Replace the run's summaries with ones aggregated from its attempts and verdicts now.
    Safe to run twice or at once: refreshes of one run take turns (take_refresh_turn). False
    when the run no longer exists. ``on_locked`` runs once the turn is taken (the refresh job
    unmarks the run there, so whatever records after it marks the run again). ``if_stale``:
    only if, once the turn is taken, its summaries no longer match its attempts (a reader that
    waited for another refresh finds it did the work)."""
    # Another connection sees only what is committed: not the writes of a transaction this
    # refresh would run inside. SQLite has one writer and no snapshot to share.
    aside = connection.vendor == "postgresql" and not connection.in_atomic_block
    with transaction.atomic():
        if not take_refresh_turn(run_id):
            return False
        run = Run.objects.get(pk=run_id)
        if on_locked is not None:
            on_locked()
        if if_stale and not stale_arms(run_id):
            return True
        _tuned_for_one_scan()
        attempts = Attempt.objects.filter(run_id=run_id)
        # The arms' totals first, with the fingerprint of the attempts they read (in the
        # snapshot exported before the other statements, when read aside): the later
        # statements read the attempts again, each as committed when it starts, so one of
        # them may see a write the totals did not (one that did not fold: folds wait for this
        # turn). Then the fingerprint stored is older than what the summaries hold, and a
        # reader rebuilds them: stale reads as stale, never fresh. Read aside, the totals
        # (the longest of the scans) run while this connection counts the rest.
        with _Aside(lambda: _arm_totals(attempts), aside) as totaled:
            for model in (ArmEvaluatorSummary, ArmSummary):
                model.objects.filter(run_id=run_id).delete()
            scored_tasks = _write_task_summaries(run_id, attempts)
            sketched = _sketched(attempts)
            evaluated = _evaluator_summaries(run_id)
            totals = totaled()
        for arm_id, keyed in sketched.items():
            totals.setdefault(arm_id, {}).update(keyed)
        _create_arm_summaries(run, totals, scored_tasks)
        ArmEvaluatorSummary.objects.bulk_create(evaluated)
    return True


class _Aside:
    """``work`` run beside this transaction's next statements, on a connection of its own, in
    a snapshot this transaction exports now: it reads the attempts as they were before any
    of the statements after it. Or run here and now, when not ``beside``."""

    def __init__(self, work: Callable[[], Any], beside: bool) -> None:
        self.work: Callable[[], Any] = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        if not beside:
            self.result = work()
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_export_snapshot()")
            snapshot = cursor.fetchone()[0]
        self.thread = threading.Thread(target=self._run, args=(snapshot,), daemon=True)
        self.thread.start()

    def _run(self, snapshot: str) -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    cursor.execute("SET TRANSACTION SNAPSHOT %s", [snapshot])
                _tuned_for_one_scan()
                self.result = self.work()
        except BaseException as error:  # raised again in the refresh's thread
            self.error = error
        finally:
            connection.close()

    def __enter__(self) -> Callable[[], Any]:
        return self._result

    def _result(self) -> Any:
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result

    def __exit__(self, *exc_info: object) -> None:
        if self.thread is not None:
            self.thread.join()


# The namespace of the refreshes' advisory locks (the first key of pg_advisory_xact_lock's pair).
REFRESH_LOCK_SPACE = 0x5052_4253


def take_refresh_turn(run_id: int) -> bool:
    """Make the rest of this transaction the run's one refresh; False when the run is gone.

    Refreshes of a run take turns on an advisory lock, not on the run's row: a refresh of a
    million attempts held that row for seconds, and pausing, resuming or cancelling the run,
    or its end, waited for it. FOR KEY SHARE only keeps the run from being deleted meanwhile,
    and lets every update of its row through. SQLite writes one transaction at a time anyway."""
    if connection.vendor != "postgresql":
        return Run.objects.filter(pk=run_id).exists()
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [REFRESH_LOCK_SPACE, run_id])
        cursor.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR KEY SHARE", [run_id])
        return cursor.fetchone() is not None


def _share_fold_turns(run_ids: Iterable[int]) -> None:
    """The rest of this transaction folds into these runs' summaries: folds of a run go
    together (their upserts add up under the rows' locks), a rebuild waits for them to commit
    and they for it. In the runs' order, so two folds never wait for each other's runs."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for run_id in sorted(run_ids):
            cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", [REFRESH_LOCK_SPACE, run_id])


def _tuned_for_one_scan() -> None:
    """A rebuild's statements are one scan each: compiling their forty aggregates took longer
    than it saved (Postgres' JIT starts at 100,000 rows), and its grouping sets are hashed
    in memory only with more than the default 4 MB (else (arm, task) was sorted on disk). At
    a million attempts the planner guesses a million (arm, task) groups where there are
    thousands, and below 256 MB it sorted them on disk: 11.3 s of a 15 s rebuild, 1.8 s hashed.
    Only for this transaction, and only as much as the hash actually takes."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('jit', 'off', true), set_config('work_mem', '256MB', true)")


def stale_arms(run_id: int) -> list[int]:
    """The run's arms whose summary does not describe their attempts as they are now:
    attempts recorded, re-priced or judged since it was built, and not folded into it. Exact
    on Postgres (the rows' versions, whatever order the writes committed in), however the
    out-of-date mark in Redis went; one pass over the run's attempts (an index scan), with
    no lock. An arm with nothing recorded needs no summary."""
    fingerprint = attempts_fingerprint()
    by_arm = Attempt.objects.filter(run_id=run_id).values("arm_id").annotate(**fingerprint).order_by()
    now = {arm_id: (seen, version) for arm_id, seen, version in by_arm.values_list("arm_id", *fingerprint)}
    stored = {
        arm_id: (seen, version)
        for arm_id, seen, version in ArmSummary.objects.filter(run_id=run_id).values_list(
            "arm_id", "attempts_seen", "attempts_version"
        )
    }
    arms = set(RunArm.objects.filter(run_id=run_id).values_list("pk", flat=True))
    return sorted(arm for arm in arms if stored.get(arm, (0, 0)) != now.get(arm, (0, 0)))


# What a rebuild counts per arm beside its totals: the latency histogram's buckets with the
# latency sketch's (each histogram bucket is a union of sketch buckets, give or take the ones
# an edge splits, so one GROUP BY counts both), and the other two sketches.
SKETCHED = {
    "latency": ("latency_bucket", "latency_sketch"),
    "first_token_sketch": ("first_token_sketch",),
    "tokens_per_s_sketch": ("tokens_per_s_sketch",),
}
SKETCHED_COLUMNS = tuple(column for columns in SKETCHED.values() for column in columns)
# The attempts each group of _arm_totals holds.
GROUP_ROWS = "group_rows"


def _arm_totals(attempts: QuerySet[Attempt]) -> dict[int, dict[str, Any]]:
    """Per arm, additive_totals() (causes counted per key, not the histogram) and the
    fingerprint of the attempts read. One plain GROUP BY: by arm, outcome and error category
    (the causes are these groups' counts) and every column the totals' filters read
    (GroupedTotals: each aggregate computed once per row, with no FILTER, and the filters
    tested per group here). The rebuild reads it beside its other statements (_Aside)."""
    grouped = GroupedTotals(
        {name: total for name, total in additive_totals().items() if name not in COUNTED_BY_KEY}
        | attempts_fingerprint()
    )
    by_arm: dict[int, list[dict[str, Any]]] = defaultdict(list)
    with _hashed():
        for group in grouped.grouped(attempts, "arm_id", "outcome", "error_category", also={GROUP_ROWS: Count("id")}):
            by_arm[group["arm_id"]].append(group)
    arms: dict[int, dict[str, Any]] = {}
    for arm_id, groups in by_arm.items():
        arm = arms[arm_id] = grouped.totals(groups) | {"infrastructure_causes": {}, "configuration_causes": {}}
        for group in groups:
            keyed_counts(arm, group["outcome"], group["error_category"], None, group[GROUP_ROWS])
    return arms


@contextlib.contextmanager
def _hashed() -> Iterator[None]:
    """The statement run inside is hashed, not sorted: the planner multiplies the distinct
    values of _arm_totals' dozen grouped columns into a group per attempt, where there are a
    few hundred, and sorted a million attempts to group them (4.8 s of CPU, 1.3 s hashed).
    For that statement only, then back to the server's setting (nothing here sets another):
    the rest of the transaction plans as it would. Not after an error: the transaction is
    aborted (a query would raise over it), and its rollback (or its savepoint's) undoes SET LOCAL."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
    yield
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort TO DEFAULT")


def _write_task_summaries(run_id: int, attempts: QuerySet[Attempt]) -> Counter[int]:
    """The run's (arm, task) counts, counted with one plain GROUP BY of its scored attempts
    (parallel on Postgres) and compared here with the stored ones: only the changed rows are
    written, the gone ones deleted. Writing them all again cost as much as counting them, in
    index entries and foreign-key checks at commit; and a statement that writes never runs in
    parallel, so the counting is not done in the write (INSERT ... SELECT). Returns each
    arm's scored tasks (its rows now)."""
    counted = (
        attempts.filter(MODEL_SCORED)
        .values("arm_id", "task_id")
        .annotate(scored=Count("id"), successes=Count("id", filter=Q(resolved=True)))
        .order_by()
        .values_list("arm_id", "task_id", "scored", "successes")
    )
    now = {(arm_id, task_id): (scored, successes) for arm_id, task_id, scored, successes in counted}
    stored = TaskSummary.objects.filter(run_id=run_id).values_list("pk", "arm_id", "task_id", "scored", "successes")
    gone, unchanged = [], set()
    for pk, arm_id, task_id, scored, successes in stored:
        counts = now.get((arm_id, task_id))
        if counts is None:
            gone.append(pk)
        elif counts == (scored, successes):
            unchanged.add((arm_id, task_id))
    if gone:
        TaskSummary.objects.filter(pk__in=gone).delete()
    changed = [
        TaskSummary(run_id=run_id, arm_id=arm_id, task_id=task_id, scored=scored, successes=successes)
        for (arm_id, task_id), (scored, successes) in now.items()
        if (arm_id, task_id) not in unchanged
    ]
    if changed:
        TaskSummary.objects.bulk_create(
            changed,
            update_conflicts=True,
            unique_fields=["arm", "task"],
            update_fields=["scored", "successes"],
        )
    return Counter(arm_id for arm_id, _ in now)


def _sketched(attempts: QuerySet[Attempt]) -> dict[int, dict[str, Any]]:
    """Per arm, its latency histogram and sketches: the attempts counted per arm and SKETCHED
    key. On Postgres in one scan (GROUPING SETS, which never runs in parallel): a parallel
    scan per key (UNION ALL) read and bucketed every attempt three times, 2.0 s of CPU at 1M
    attempts against 1.4 s, and the rebuild is bound by CPU, not by cores. SQLite has no
    GROUPING SETS."""
    rows = attempts.annotate(latency_bucket=latency_bucket(), **sketch_buckets()).values("arm_id", *SKETCHED_COLUMNS)
    inner, params = rows.order_by().query.sql_with_params()
    if connection.vendor == "postgresql":
        select = _grouping_sets(inner)
    else:
        select = " UNION ALL ".join(_grouped_by(inner, index) for index in range(len(SKETCHED)))
        params = params * len(SKETCHED)
    arms: dict[int, dict[str, Any]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        for arm_id, key, *values, count in cursor.fetchall():
            arm, columns = arms[arm_id], SKETCHED[list(SKETCHED)[key]]
            keyed = dict(zip(SKETCHED_COLUMNS, values, strict=True))
            for column in columns:
                value = keyed[column]
                if value is None:
                    continue
                if column == "latency_bucket":
                    keyed_counts(arm, None, None, value, count)
                else:
                    sketch = arm.setdefault(column, {})
                    sketch[str(value)] = sketch.get(str(value), 0) + count
    return arms


def _grouping_sets(inner: str) -> str:
    """The attempts' count per arm and SKETCHED key, each row with its key's index: GROUPING()
    of the key's first column tells the sets apart (a NULL bucket is a value of its own set)."""
    firsts = [columns[0] for columns in SKETCHED.values()]
    key = "CASE " + " ".join(f"WHEN GROUPING({first}) = 0 THEN {index}" for index, first in enumerate(firsts)) + " END"
    sets = ", ".join(f"(arm_id, {', '.join(columns)})" for columns in SKETCHED.values())
    columns = ", ".join(SKETCHED_COLUMNS)
    return f"SELECT arm_id, {key}, {columns}, count(*) FROM ({inner}) AS attempt GROUP BY GROUPING SETS ({sets})"


def _grouped_by(inner: str, index: int) -> str:
    """The attempts' count per arm and SKETCHED key ``index``: its columns, the others NULL
    (typed: a bare NULL in the first branches of a UNION is text)."""
    grouped = SKETCHED[list(SKETCHED)[index]]
    columns = ", ".join(column if column in grouped else "CAST(NULL AS integer)" for column in SKETCHED_COLUMNS)
    return (
        f"SELECT arm_id, {index}, {columns}, count(*) FROM ({inner}) AS attempt GROUP BY arm_id, {', '.join(grouped)}"
    )


def _create_arm_summaries(run: Run, totals: dict[int, dict[str, Any]], scored_tasks: Counter[int]) -> None:
    now = timezone.now()
    summaries = []
    for arm_id in run.arms.values_list("pk", flat=True):
        arm_totals = totals.get(arm_id, {})
        causes = arm_totals.pop("infrastructure_causes", {})
        configuration_causes = arm_totals.pop("configuration_causes", {})
        summaries.append(
            ArmSummary(
                run=run,
                arm_id=arm_id,
                refreshed_at=now,
                scored_tasks=scored_tasks.get(arm_id, 0),
                infrastructure_causes={cause: count for cause, count in causes.items() if count},
                configuration_causes={cause: count for cause, count in configuration_causes.items() if count},
                **arm_totals,
            )
        )
    ArmSummary.objects.bulk_create(summaries)


def _evaluator_summaries(run_id: int) -> list[ArmEvaluatorSummary]:
    summaries = []
    for group in evaluator_totals(Verdict.objects.filter(attempt__run_id=run_id)):
        arm_id = group["attempt__arm_id"]
        # Stored, not drawn at each page view: two thousand resamples per arm and profile.
        interval = evaluator_interval(group)
        summaries.append(
            ArmEvaluatorSummary(
                run_id=run_id,
                arm_id=arm_id,
                profile_id=group["profile_id"],
                judged=group["judged"],
                errors=group["errors"],
                overall_sum=group["overall_sum"],
                overall_counts=group["scores"],
                ci_low=interval[0] if interval else None,
                ci_high=interval[1] if interval else None,
                cost_usd=group["cost"],
                unpriced=group["unpriced"],
            )
        )
    return summaries


# --- folding a recorded chunk ------------------------------------------------------------------


def fold_recorded(attempt_ids: Sequence[int]) -> None:
    """Add these attempts, just recorded in this transaction, to their runs' summaries: in the
    transaction, so the summaries count them from the moment they commit, and a rollback
    takes both. A few statements whatever the run's size: the runs' fold turn, then the
    chunk's aggregates per arm and per (arm, task) (pk IN the chunk) upserted into the (arm,
    task) counts and the arms' sums; on Postgres that is one prepared statement
    (_fold_in_one_statement), on SQLite four statements and Python between them.

    The attempts must have been unrecorded (queued or running) before this transaction: their
    old rows counted for nothing, and the fingerprint (attempts_seen, attempts_version) moves
    by exactly what is added. Call it after the transaction's last write to these rows."""
    if not attempt_ids:
        return
    if connection.vendor == "postgresql":
        _fold_in_one_statement(attempt_ids)
    else:
        _fold_in_python(attempt_ids)


def _fold_in_one_statement(attempt_ids: Sequence[int]) -> None:
    """Postgres' fold: the runs' fold turn, then one prepared statement (_fold_sql) that
    aggregates the chunk, upserts its (arm, task) counts and its arms' sums. Reading the
    aggregates into Python to write them back cost more CPU than Postgres spent on them:
    decoding, counting the sketches' buckets, encoding every row as JSON (4.5 ms a chunk)."""
    ids = list(attempt_ids)
    with connection.cursor() as cursor:
        # Its own statement, before the upserts: they see whatever a rebuild it waited for wrote.
        _execute_prepared(cursor, "prbench_fold_turns", _fold_turns_sql, [ids])
        _execute_prepared(cursor, "prbench_fold", _fold_sql, [ids, timezone.now()])


def _fold_turns_sql() -> str:
    """_share_fold_turns for the chunk's runs, found from its ids ($1)."""
    table = connection.ops.quote_name(Attempt._meta.db_table)
    return (
        f"SELECT pg_advisory_xact_lock_shared({REFRESH_LOCK_SPACE}, run_id::integer) FROM "
        f"(SELECT DISTINCT run_id FROM {table} WHERE id = ANY($1::bigint[]) ORDER BY run_id) AS runs"
    )


def _fold_sql() -> str:
    """The chunk's (arm, task) counts and arms' sums upserted as _fold_in_python upserts them,
    in one statement: $1 the chunk's ids, $2 the time it is folded at. An arm's scored_tasks
    grow by its tasks whose count after the upsert is the chunk's (scored for the first time);
    its causes are the chunk's without the zeros."""
    tasks_table = connection.ops.quote_name(TaskSummary._meta.db_table)
    arms_table = connection.ops.quote_name(ArmSummary._meta.db_table)
    quote = connection.ops.quote_name
    chunk_totals = {name: f"arms.{quote(TOTAL + name)}" for name in {*additive_totals(), *attempts_fingerprint()}}
    given = {
        "run_id": "arms.run_id",
        "arm_id": "arms.arm_id",
        "refreshed_at": "$2::timestamptz",
        "scored_tasks": "coalesce(new_tasks.count, 0)",
        **chunk_totals,
        # Without a failure of its kind the chunk's causes are all zero: no call to strip them.
        **{
            name: f"CASE WHEN {chunk_totals[failures]} = 0 THEN '{{}}'::jsonb "
            f"ELSE prbench_add_counts('{{}}'::jsonb, {chunk_totals[name]}) END"
            for name, failures in zip(CAUSES, ("infrastructure_failures", "configuration_failures"), strict=True)
        },
        **{name: f"arms.{quote(TOTAL + name)}" for name in SKETCHES},
    }
    fields = _arm_fields()
    values = ", ".join(given[field.attname] if field.attname in given else _default(field) for field in fields)
    columns = ", ".join(quote(field.attname) for field in fields)
    task_columns = ", ".join(TASK_SUMMARY_COLUMNS)
    scored, successes = quote(TOTAL + "scored"), quote(TOTAL + "successes")
    return f"""
        WITH arms AS MATERIALIZED ({_chunk_sql("arms_counted")}),
        tasks AS MATERIALIZED ({_chunk_sql("tasks")}),
        upserted AS (
            INSERT INTO {tasks_table} ({task_columns})
            SELECT run_id, arm_id, task_id, {scored}, {successes} FROM tasks
            ON CONFLICT (arm_id, task_id) DO UPDATE SET scored = {tasks_table}.scored + EXCLUDED.scored,
            successes = {tasks_table}.successes + EXCLUDED.successes
            RETURNING {tasks_table}.arm_id, {tasks_table}.task_id, {tasks_table}.scored
        ),
        new_tasks AS (
            SELECT upserted.arm_id, count(*) AS count FROM upserted JOIN tasks
            ON tasks.arm_id = upserted.arm_id AND tasks.task_id = upserted.task_id AND tasks.{scored} = upserted.scored
            GROUP BY upserted.arm_id
        )
        INSERT INTO {arms_table} ({columns})
        SELECT {values} FROM arms LEFT JOIN new_tasks ON new_tasks.arm_id = arms.arm_id
        ON CONFLICT (arm_id) DO UPDATE SET {_arm_updates(arms_table)}
    """


CAUSES = ("infrastructure_causes", "configuration_causes")


def _default(field: Any) -> str:
    """SQL: the field's default, for a column no aggregate of the chunk gives (none today)."""
    value = field.get_db_prep_save(field.get_default(), connection)
    return connection.ops.compose_sql("%s", [value])  # type: ignore[attr-defined]  # Postgres'


def _fold_in_python(attempt_ids: Sequence[int]) -> None:
    """The chunk's aggregates read into Python, counted there and upserted: SQLite's fold
    (and Postgres' before _fold_in_one_statement, which must write the same rows)."""
    arms = _chunk_rows("arms", attempt_ids)
    if not arms:
        return
    _share_fold_turns({arm["run_id"] for arm in arms})
    new_tasks = _fold_task_summaries(_chunk_rows("tasks", attempt_ids))
    for arm in arms:
        arm["scored_tasks"] = new_tasks[arm["arm_id"]]
        for name in SKETCHES:
            arm[name] = sketches.count_buckets(arm[name])
        for name in CAUSES:
            arm[name] = {cause: count for cause, count in arm[name].items() if count}
    _fold_arm_summaries(arms)


# An id no attempt has: where the chunk's ids go in the aggregates compiled once (_chunk_query).
CHUNK_IDS = -7_310_431
JSON_TOTALS = ("infrastructure_causes", "configuration_causes", "latency_histogram", *SKETCHES)


@functools.cache
def _chunk_query(kind: str) -> tuple[str, tuple[Any, ...]]:
    """The chunk's aggregate per arm ("arms": every sum, the sketches' buckets listed;
    "arms_counted": counted, Postgres') or per (arm, task) ("tasks"), compiled once per
    process: building fifty aggregates with the ORM cost more than running them (13 ms a chunk)."""
    attempts = Attempt.objects.filter(pk__in=[CHUNK_IDS])
    rows: QuerySet[Attempt, Any]
    if kind == "tasks":
        rows = attempts.filter(MODEL_SCORED).values("run_id", "arm_id", "task_id")
        totals = {"scored": Count("id"), "successes": Count("id", filter=Q(resolved=True))}
    else:
        rows = attempts.values("run_id", "arm_id")
        each = BucketCounts if kind == "arms_counted" else Collect
        collected = {name: each(expression) for name, expression in sketch_buckets().items()}
        totals = additive_totals() | attempts_fingerprint() | collected
    return rows.annotate(**{TOTAL + name: total for name, total in totals.items()}).order_by().query.sql_with_params()


def _chunk_rows(kind: str, attempt_ids: Sequence[int]) -> list[dict[str, Any]]:
    """_chunk_query's rows for these attempts. On Postgres a statement prepared once per
    connection, its plan too (planning fifty aggregates cost as much as running them on 64
    rows); on SQLite the cached SQL with the ids spliced in (sqlite3 caches the statement)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            _execute_prepared(cursor, f"prbench_fold_{kind}", functools.partial(_chunk_sql, kind), [list(attempt_ids)])
        else:
            sql, params = _chunk_query(kind)
            where = params.index(CHUNK_IDS)
            spliced = sql.replace(_chunk_in(), _chunk_in().replace("%s", ", ".join(["%s"] * len(attempt_ids))))
            cursor.execute(spliced, [*params[:where], *attempt_ids, *params[where + 1 :]])
        names = [description[0].removeprefix(TOTAL) for description in cursor.description]
        return [_decoded(dict(zip(names, row, strict=True))) for row in cursor.fetchall()]


def _chunk_in() -> str:
    return f"{connection.ops.quote_name(Attempt._meta.db_table)}.{connection.ops.quote_name('id')} IN (%s)"


def _chunk_sql(kind: str) -> str:
    """Postgres' _chunk_query: the chunk's ids its one parameter ($1, a bigint[]), the others inlined."""
    sql, params = _chunk_query(kind)
    where = params.index(CHUNK_IDS)
    text = sql.replace(_chunk_in(), _chunk_in().replace("IN (%s)", "= ANY($1::bigint[])"))
    return connection.ops.compose_sql(text, params[:where] + params[where + 1 :])  # type: ignore[attr-defined]  # Postgres'


def _execute_prepared(cursor: Any, name: str, statement: Callable[[], str], params: list[Any]) -> None:
    """EXECUTE the statement prepared as ``name`` on this connection, preparing it first
    (``statement()``: its text, parameters $1.. typed there) if this connection has not."""
    prepared = connection.connection.__dict__.setdefault("prbench_prepared", set())
    if name not in prepared:
        cursor.execute(f"PREPARE {name} AS {statement()}")
        prepared.add(name)
    cursor.execute(f"EXECUTE {name}({', '.join(['%s'] * len(params))})", params)


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    for name in JSON_TOTALS:
        if isinstance(row.get(name), str):
            row[name] = json.loads(row[name])
    return row


def _fold_task_summaries(rows: list[dict[str, Any]]) -> dict[int, int]:
    """Upsert the chunk's (arm, task) counts; per arm, how many of its tasks were scored for
    the first time (its scored_tasks grow by that)."""
    new_tasks: dict[int, int] = defaultdict(int)
    if not rows:
        return new_tasks
    table = connection.ops.quote_name(TaskSummary._meta.db_table)
    columns = ", ".join(TASK_SUMMARY_COLUMNS)
    source, params = _rows_source(table, TASK_SUMMARY_COLUMNS, [[row[c] for c in TASK_SUMMARY_COLUMNS] for row in rows])
    added = {(row["arm_id"], row["task_id"]): row["scored"] for row in rows}
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) {source} "
            f"ON CONFLICT (arm_id, task_id) DO UPDATE SET scored = {table}.scored + EXCLUDED.scored, "
            f"successes = {table}.successes + EXCLUDED.successes RETURNING arm_id, task_id, scored",
            params,
        )
        for arm_id, task_id, scored in cursor.fetchall():
            new_tasks[arm_id] += scored == added[(arm_id, task_id)]  # nothing scored before this chunk
    return new_tasks


def _rows_source(table: str, columns: Sequence[str], rows: list[list[Any]]) -> tuple[str, list[Any]]:
    """The rows to insert as SQL: on Postgres one JSON parameter read as the table's rows
    (quoting hundreds of parameters one by one cost the client more than the upsert cost
    the server), on SQLite a VALUES list."""
    if connection.vendor == "postgresql":
        names = ", ".join(connection.ops.quote_name(column) for column in columns)
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        return (
            f"SELECT {names} FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb)",
            [json.dumps(records, cls=DjangoJSONEncoder)],
        )
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    return f"VALUES {', '.join([row] * len(rows))}", [value for each in rows for value in each]


def _fold_arm_summaries(arms: list[dict[str, Any]]) -> None:
    """One upsert of the arms' sums: a new arm's row holds the chunk's, an existing one adds
    them under its row's lock, so workers folding into one arm at once all count."""
    fields = _arm_fields()
    now = timezone.now()
    rows = []
    for sums in arms:
        given = sums | {"refreshed_at": now}
        values = [given[field.attname] if field.attname in given else field.get_default() for field in fields]
        rows.append([_prepared(field, value) for field, value in zip(fields, values, strict=True)])
    table = connection.ops.quote_name(ArmSummary._meta.db_table)
    source, params = _rows_source(table, [field.attname for field in fields], rows)
    columns = ", ".join(connection.ops.quote_name(field.attname) for field in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) {source} ON CONFLICT (arm_id) DO UPDATE SET {_arm_updates(table)}",
            params,
        )


def _prepared(field: Any, value: Any) -> Any:
    """On Postgres the JSON encoder quotes the values (a sketch is its array's text), on SQLite the fields."""
    if connection.vendor == "postgresql" and not isinstance(field, sketches.SketchField):
        return value
    return field.get_db_prep_save(value, connection)


def _arm_fields() -> list[Any]:
    """ArmSummary's columns but its id (each named as its attname: no column is renamed)."""
    return [field for field in ArmSummary._meta.concrete_fields if not field.primary_key]


@functools.cache
def _arm_updates(table: str) -> str:
    fields = _arm_fields()
    return ", ".join(_added(table, field) for field in fields if field.attname not in ("run_id", "arm_id"))


def _histograms_added(old: str, new: str) -> str:
    """SQL: two latency histograms added place by place, in one expression where both have
    every bucket (prbench_add_lists, a query per call, where one is empty: a rebuilt arm
    that measured nothing)."""
    width = len(LATENCY_BUCKETS_MS) + 1
    places = ", ".join(f"({old} ->> {place})::bigint + ({new} ->> {place})::bigint" for place in range(width))
    return (
        f"CASE WHEN jsonb_array_length({old}) = {width} AND jsonb_array_length({new}) = {width} "
        f"THEN jsonb_build_array({places}) ELSE prbench_add_lists({old}, {new}) END"
    )


def _added(table: str, field: Any) -> str:
    """The SET clause adding the chunk's value of ``field`` (EXCLUDED) to the row's."""
    column = connection.ops.quote_name(field.attname)
    old, new = f"{table}.{column}", f"EXCLUDED.{column}"
    if field.name == "refreshed_at":
        return f"{column} = {new}"
    if connection.vendor == "postgresql":
        if isinstance(field, sketches.SketchField):
            return f"{column} = prbench_add_buckets({old}, {new})"
        if field.attname in CAUSES:  # most chunks add none: no call (prbench_add_counts runs a query)
            return f"{column} = CASE WHEN {new} = '{{}}'::jsonb THEN {old} ELSE prbench_add_counts({old}, {new}) END"
        if field.attname == "latency_histogram":
            return f"{column} = {_histograms_added(old, new)}"
    if field.get_internal_type() in ("JSONField", "SketchField"):
        function = "prbench_add_lists" if field.default is list else "prbench_add_counts"
        return f"{column} = {function}({old}, {new})"
    if field.null:  # a sum over no value is NULL, not zero (cost_usd: unknown, not free)
        return f"{column} = CASE WHEN {old} IS NULL THEN {new} WHEN {new} IS NULL THEN {old} ELSE {old} + {new} END"
    return f"{column} = {old} + {new}"
