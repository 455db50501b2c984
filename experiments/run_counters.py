"""The triggers that keep each run's counters row (RunCounters) exact, and the recount from the
attempts and verdicts themselves.

Why triggers and not bookkeeping in Python: attempts change status in many places (claims,
records, give-backs, the recovery sweep, cancel, the claim limit, pause and resume, the run's
start, a run's deletion), some of them raw SQL bulk statements; a trigger sees every statement
whoever runs it, in the statement's own transaction, so a counter can never miss a change or
count one that was rolled back.

On Postgres the triggers are statement-level with transition tables: a chunk of 64 attempts
recorded in one UPDATE costs one aggregate over its 128 old and new rows and one update of the
counters row, not 64. A statement that changes no status, repeat count or final verdict (most
updates of an attempt's other columns) leaves the row alone and takes no lock on it. On SQLite
(the demo) they are row-level triggers on the columns counted.

Django rebuilds a SQLite table to alter it, which drops its triggers: ``install`` runs after
every ``migrate`` (experiments/apps.py) and recounts when it had to put them back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection as default_connection
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, F, Q, Sum

from evaluation.models import Verdict
from experiments.models import Attempt, AttemptStatus, Run, RunCounters
from experiments.progress import FINAL_VERDICTS
from providers.errors import ErrorCategory

COUNTERS = "experiments_runcounters"
STATUSES = tuple(AttemptStatus.values)
COLUMNS = (*STATUSES, "repeat_calls", "judged", "spent_usd", "budget_refused")
REFUSED = ErrorCategory.BUDGET_EXCEEDED.value
# What each counted table adds to a counters row, as SQL over one changed row ``change``
# carrying a ``sign`` (-1 for the row as it was, +1 as it is).
ATTEMPT_DELTAS = {
    **{status: f"sum(sign) FILTER (WHERE status = '{status}')" for status in STATUSES},
    "repeat_calls": "sum(sign * repeat_calls)",
    "judged": "0",
    "spent_usd": "sum(sign * cost_usd)",
    "budget_refused": f"sum(sign) FILTER (WHERE error_category = '{REFUSED}')",
}
VERDICT_DELTAS = {column: "sum(sign)" if column == "judged" else "0" for column in COLUMNS}
FINAL_SQL = ", ".join(f"'{status}'" for status in FINAL_VERDICTS)


def _changes(table: str, op: str) -> str:
    """The rows a statement on ``table`` changed, each as it was (sign -1) and as it is (+1),
    restricted to what the counters count."""
    columns = (
        "run_id, status, repeat_calls, cost_usd, error_category"
        if table == "experiments_attempt"
        else "run_id, profile_id, status"
    )
    sides = {"INSERT": [("new_rows", 1)], "DELETE": [("old_rows", -1)], "UPDATE": [("old_rows", -1), ("new_rows", 1)]}
    rows = " UNION ALL ".join(f"SELECT {columns}, {sign} AS sign FROM {name}" for name, sign in sides[op])
    if table == "experiments_attempt":
        return rows
    # A verdict counts when it is final and of the run's own profile (a replay with another
    # profile judges the same attempts and is not the run's judging).
    return (
        f"SELECT v.run_id, v.sign FROM ({rows}) AS v JOIN experiments_run AS r"
        f" ON r.id = v.run_id AND r.evaluator_profile_id = v.profile_id WHERE v.status IN ({FINAL_SQL})"
    )


def _postgres_function(table: str, op: str) -> tuple[str, str]:
    deltas = ATTEMPT_DELTAS if table == "experiments_attempt" else VERDICT_DELTAS
    sums = ", ".join(f"coalesce({sql}, 0) AS {column}" for column, sql in deltas.items())
    changed = " OR ".join(f"d.{column} <> 0" for column in COLUMNS)
    by_run = f"SELECT run_id, {sums} FROM ({_changes(table, op)}) AS change GROUP BY run_id"
    delta = f"SELECT * FROM ({by_run}) AS d WHERE {changed}"
    if op == "DELETE":
        # An UPDATE only: a run being deleted may have lost its counters row already, and
        # inserting it again would outlive the run.
        apply = f"UPDATE {COUNTERS} AS c SET " + ", ".join(f"{col} = c.{col} + d.{col}" for col in COLUMNS)
        apply += f" FROM ({delta}) AS d WHERE c.run_id = d.run_id"
    else:
        # Rows in run order: two statements that touch the same runs lock them in one order.
        apply = (
            f"INSERT INTO {COUNTERS} AS c (run_id, {', '.join(COLUMNS)}) {delta} ORDER BY d.run_id"
            f" ON CONFLICT (run_id) DO UPDATE SET " + ", ".join(f"{col} = c.{col} + EXCLUDED.{col}" for col in COLUMNS)
        )
    name = f"run_counters_{table}_{op.lower()}"
    function = (
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {apply}; RETURN NULL; END $$"
    )
    referencing = {"INSERT": "NEW TABLE AS new_rows", "DELETE": "OLD TABLE AS old_rows"}.get(
        op, "OLD TABLE AS old_rows NEW TABLE AS new_rows"
    )
    trigger = (
        f"CREATE OR REPLACE TRIGGER {name} AFTER {op} ON {table} REFERENCING {referencing}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
    )
    return function, trigger


def _sqlite_trigger(table: str, op: str) -> str:
    """One row-level trigger; SQLite runs it once per changed row."""
    name = f"run_counters_{table}_{op.lower()}"
    row = "OLD" if op == "DELETE" else "NEW"
    sides = {"INSERT": [("NEW", "+")], "DELETE": [("OLD", "-")], "UPDATE": [("NEW", "+"), ("OLD", "-")]}[op]
    if table == "experiments_attempt":
        counted = {status: [f"{sign} ({side}.status = '{status}')" for side, sign in sides] for status in STATUSES}
        counted["repeat_calls"] = [f"{sign} {side}.repeat_calls" for side, sign in sides]
        counted["spent_usd"] = [f"{sign} coalesce({side}.cost_usd, 0)" for side, sign in sides]
        counted["budget_refused"] = [f"{sign} ({side}.error_category = '{REFUSED}')" for side, sign in sides]
        of_columns = ("status", "repeat_calls", "cost_usd", "error_category")
        when = "WHEN " + " OR ".join(f"OLD.{column} IS NOT NEW.{column}" for column in of_columns)
        of = " OF " + ", ".join(of_columns)
    else:
        run_profile = "(SELECT evaluator_profile_id FROM experiments_run WHERE id = {side}.run_id)"
        final = f"({{side}}.status IN ({FINAL_SQL}) AND {{side}}.profile_id IS {run_profile})"
        counted = {"judged": [f"{sign} {final.format(side=side)}" for side, sign in sides]}
        when = "WHEN OLD.status IS NOT NEW.status OR OLD.profile_id IS NOT NEW.profile_id"
        of = " OF status, profile_id"
    sets = ", ".join(f"{column} = {column} {' '.join(terms)}" for column, terms in counted.items())
    create_row = (
        ""
        if op == "DELETE"
        else f"INSERT OR IGNORE INTO {COUNTERS} (run_id, {', '.join(COLUMNS)})"
        f" VALUES (NEW.run_id, {', '.join('0' for _ in COLUMNS)}); "
    )
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {op}{of if op == 'UPDATE' else ''} ON {table}"
        f" FOR EACH ROW {when if op == 'UPDATE' else ''} BEGIN {create_row}"
        f"UPDATE {COUNTERS} SET {sets} WHERE run_id = {row}.run_id; END"
    )


COUNTED_TABLES = ("experiments_attempt", "evaluation_verdict")
OPS = ("INSERT", "UPDATE", "DELETE")
TRIGGER_NAMES = tuple(f"run_counters_{table}_{op.lower()}" for table in COUNTED_TABLES for op in OPS)


def trigger_sql(vendor: str) -> list[str]:
    """The statements that (re)create every counting trigger, idempotent."""
    statements: list[str] = []
    for table in COUNTED_TABLES:
        for op in OPS:
            if vendor == "postgresql":
                statements.extend(_postgres_function(table, op))
            else:
                statements.append(_sqlite_trigger(table, op))
    return statements


def installed_triggers(connection: BaseDatabaseWrapper) -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT DISTINCT tgname FROM pg_trigger WHERE tgname LIKE 'run\\_counters\\_%'")
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'run_counters_%'")
        return {name for (name,) in cursor.fetchall()}


def install(connection: BaseDatabaseWrapper = default_connection, replace: bool = False) -> bool:
    """Create the triggers when any is missing (or ``replace``: all of them again); True when
    any was missing: the counters may then have missed changes and need a recount."""
    missing = bool(set(TRIGGER_NAMES) - installed_triggers(connection))
    if missing or replace:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            for statement in trigger_sql(connection.vendor):
                cursor.execute(statement)
    return missing


def uninstall(connection: BaseDatabaseWrapper = default_connection) -> None:
    postgres = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        for table in COUNTED_TABLES:
            for op in OPS:
                name = f"run_counters_{table}_{op.lower()}"
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if postgres else ""))
                if postgres:
                    cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")


def counted(run_ids: Iterable[int] | None = None, using: str = "default") -> dict[int, dict[str, Any]]:
    """Each run's counters as the attempts and verdicts say now: GROUP BYs over the tables."""
    attempts = Attempt.objects.using(using).order_by()
    verdicts = Verdict.objects.using(using).order_by().filter(status__in=FINAL_VERDICTS)
    if run_ids is not None:
        run_ids = list(run_ids)
        attempts, verdicts = attempts.filter(run_id__in=run_ids), verdicts.filter(run_id__in=run_ids)
    by_status = {status: Count("pk", filter=Q(status=status)) for status in STATUSES}
    rows = attempts.values("run_id").annotate(
        **by_status,
        repeat_calls=Sum("repeat_calls"),
        spent_usd=Sum("cost_usd"),
        budget_refused=Count("pk", filter=Q(error_category=REFUSED)),
    )
    from_attempts = [column for column in COLUMNS if column != "judged"]
    counts: dict[int, dict[str, Any]] = {}
    for run_id, *figures in rows.values_list("run_id", *from_attempts):
        counts[run_id] = {**dict(zip(from_attempts, (figure or 0 for figure in figures), strict=True)), "judged": 0}
    judged = verdicts.filter(profile_id=F("run__evaluator_profile_id")).values("run_id").annotate(n=Count("pk"))
    for row in judged:
        counts.setdefault(row["run_id"], dict.fromkeys(COLUMNS, 0))["judged"] = row["n"]
    return counts


def recount(run_ids: Iterable[int] | None = None, using: str = "default") -> list[int]:
    """Set the runs' counters (every run's when None) from the attempts and verdicts; the ids
    of those that were wrong. Exact while workers run: it locks each counters row before it
    counts, so a change committed before the lock is in the count and one made after waits
    for the lock and adds its delta to the recounted row."""
    runs = Run.objects.using(using).order_by("pk")
    if run_ids is not None:
        runs = runs.filter(pk__in=list(run_ids))
    wrong = []
    for run_id in runs.values_list("pk", flat=True):
        with transaction.atomic(using=using):
            RunCounters.objects.using(using).bulk_create([RunCounters(run_id=run_id)], ignore_conflicts=True)
            row = RunCounters.objects.using(using).select_for_update().get(run_id=run_id)
            truth = counted([run_id], using=using).get(run_id, dict.fromkeys(COLUMNS, 0))
            if any(getattr(row, column) != truth[column] for column in COLUMNS):
                wrong.append(run_id)
                RunCounters.objects.using(using).filter(run_id=run_id).update(**truth)
    return wrong
