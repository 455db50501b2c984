"""The claim's one statement, written once as SQL.

A job claims a chunk of attempts with one conditional UPDATE (experiments/pipeline.py
``claim_attempts``). Built by the ORM, that statement (seven CASE expressions, two subqueries)
cost more Python to compile than the database spent running it, on every chunk: a quarter of a
worker's time on zero-latency attempts. Here it is text built once per database vendor and claim
limit, and it hands back the claimed rows itself (RETURNING), so no second query reads them.

What it does is ``claim_attempts``'s contract: each attempt still queued, in a running run, is
taken by the token, unless it was already handed out ``max_claims`` times without a result (a
poison attempt, retired as the platform's error) or its arm was stopped as misconfigured (ended
without a call); both end in this same statement, never paid for.
"""

from __future__ import annotations

import functools
import uuid
from typing import NamedTuple

from django.db import connection
from django.utils import timezone

from experiments.misconfigured import CHANGE_SETTINGS, NOT_CALLED_PREFIX
from experiments.models import Attempt, AttemptStatus, Run, RunArm, RunStatus
from providers.errors import ErrorCategory
from providers.outcomes import OutcomeClass, outcome_class


class ClaimedRow(NamedTuple):
    """One row the claim changed, as RETURNING gives it."""

    id: int
    status: str
    code: uuid.UUID
    run_id: int
    task_id: int
    arm_id: int
    repetition: int
    sequence: int
    claims: int


RETURNED = ClaimedRow._fields


def claim_rows(attempt_ids: list[int], token: uuid.UUID, claimer: str, max_claims: int) -> list[ClaimedRow]:
    """Run the claim; every row it changed: claimed (``running``) or ended here (``failed``)."""
    if not attempt_ids:
        return []
    params = {
        "token": _uuid_param(token),
        "claimer": claimer,
        "max_claims": max_claims,
        "now": connection.ops.adapt_datetimefield_value(timezone.now()),
        "retired_message": f"claimed {max_claims} times without a result; not sent to the provider again",
    }
    sql, ids = _sql(connection.vendor), _ids(attempt_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql.replace("%(ids)s", ids[0]), {**params, **ids[1]})
        rows = cursor.fetchall()
    return [ClaimedRow(pk, status, _uuid(code), *rest) for pk, status, code, *rest in rows]


def _ids(attempt_ids: list[int]) -> tuple[str, dict]:
    """The id list: one array parameter on Postgres, one placeholder each on SQLite."""
    if connection.vendor == "postgresql":
        return "= ANY(%(ids)s)", {"ids": list(attempt_ids)}
    names = {f"id{index}": pk for index, pk in enumerate(attempt_ids)}
    return "IN (" + ", ".join(f"%({name})s" for name in names) + ")", names


@functools.cache  # by vendor: a test process may switch databases
def _sql(vendor: str) -> str:
    quote = connection.ops.quote_name
    attempts, runs, arms = (quote(model._meta.db_table) for model in (Attempt, Run, RunArm))
    # The attempt's own columns, named with its table: the arm joined in has columns too.
    own = functools.partial(_column, attempts)
    retired = f"{own('claims')} >= %(max_claims)s"
    stopped = "arm.misconfigured_at IS NOT NULL"
    note = (
        f"'{_sql_text(NOT_CALLED_PREFIX)}' || COALESCE(arm.misconfigured_error, '') || ': ' || "
        f"COALESCE(arm.misconfigured_message, '') || '{_sql_text(CHANGE_SETTINGS)}'"
    )

    def unless_retired(column: str, claimed: str, poisoned: str, misconfigured: str | None = None) -> str:
        return (
            f"{column} = CASE WHEN {retired} THEN {poisoned} WHEN {stopped} THEN {misconfigured or own(column)} "
            f"ELSE {claimed} END"
        )

    platform = ErrorCategory.PLATFORM_ERROR
    failed, running = AttemptStatus.FAILED, AttemptStatus.RUNNING
    poisoned_outcome = outcome_class(AttemptStatus.FAILED, platform)
    assignments = [
        "claimed_by = %(claimer)s",
        "claim_token = %(token)s",
        unless_retired("status", f"'{running}'", f"'{failed}'", f"'{failed}'"),
        unless_retired("started_at", "%(now)s", own("started_at")),
        unless_retired("claims", f"{own('claims')} + 1", own("claims")),
        unless_retired(
            "error_category", own("error_category"), f"'{platform}'", f"'{ErrorCategory.ARM_MISCONFIGURED}'"
        ),
        unless_retired("outcome", own("outcome"), f"'{poisoned_outcome}'", f"'{OutcomeClass.CONFIGURATION_FAILURE}'"),
        unless_retired("error_message", own("error_message"), "%(retired_message)s", note),
        unless_retired("scored_at", own("scored_at"), "%(now)s", "%(now)s"),
    ]
    # The attempts are reached by their ids alone, whatever the table's statistics say. Postgres
    # reached them through a queued range whenever the run's attempts were not yet in the
    # statistics (a new run in a large table, autovacuum late): from the run, through its
    # queued range (the run's check pulled up into a join), or through every queued attempt of
    # the table (the status test as an index condition), filtering that by id. A claim of 8
    # read 5,000 rows; a run's claims cost its size squared (issue 31). So the run's check stays
    # a subquery run per row found (OFFSET 0: SQLite has no OFFSET without a LIMIT, nor this
    # choice), and the status is tested as "IS TRUE", which no index serves (never NULL).
    running_runs = f"SELECT 1 FROM {runs} run WHERE run.id = {own('run_id')} AND run.status = '{RunStatus.RUNNING}'" + (
        " OFFSET 0" if vendor == "postgresql" else ""
    )
    returning = ", ".join(own(name) for name in RETURNED)
    # The arm is joined once per row (its stop mark and note read in every CASE), where a
    # subquery per CASE cost Postgres nine lookups per attempt. The run's status stays an
    # EXISTS: Postgres re-checks the whole WHERE on a row another transaction changed while
    # this one waited for its lock (an attempt claimed meanwhile is no longer queued), so two
    # workers never both claim one attempt.
    return (
        f"UPDATE {attempts} SET {', '.join(assignments)} FROM {arms} arm "
        f"WHERE arm.id = {own('arm_id')} AND {own('id')} %(ids)s "
        f"AND ({own('status')} = '{AttemptStatus.QUEUED}') IS TRUE "
        f"AND EXISTS ({running_runs}) RETURNING {returning}"
    )


def _column(table: str, name: str) -> str:
    return f"{table}.{connection.ops.quote_name(name)}"


def _sql_text(text: str) -> str:
    """A constant as an SQL string literal's body, inside a statement with named parameters."""
    return text.replace("'", "''").replace("%", "%%")


def _uuid_param(value: uuid.UUID):
    return value if connection.features.has_native_uuid_field else value.hex


def _uuid(value) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


class HeldRow(NamedTuple):
    """An attempt a record still holds (its token's, running), with what recording it needs."""

    id: int
    run_id: int
    arm_id: int
    provider: str
    evaluator_profile_id: int | None


def lock_held(attempt_ids: list[int], token: uuid.UUID) -> list[HeldRow]:
    """Of these attempts, those the token still holds, locked for the rest of the transaction
    (SQLite: its IMMEDIATE transaction already holds the write lock), so a requeue cannot slip
    in between this check and the record's writes. Their arm's provider (for the metrics) and
    their run's evaluator profile (whether to queue judging) come along; only the attempt rows
    are locked."""
    if not attempt_ids:
        return []
    ids = _ids(attempt_ids)
    with connection.cursor() as cursor:
        cursor.execute(_held_sql(connection.vendor).replace("%(ids)s", ids[0]), {"token": _uuid_param(token), **ids[1]})
        return [HeldRow(*row) for row in cursor.fetchall()]


@functools.cache  # by vendor, as _sql
def _held_sql(vendor: str) -> str:
    quote = connection.ops.quote_name
    attempts, runs, arms = (quote(model._meta.db_table) for model in (Attempt, Run, RunArm))
    return (
        f"SELECT a.id, a.run_id, a.arm_id, arm.provider, run.evaluator_profile_id FROM {attempts} a "
        f"JOIN {arms} arm ON arm.id = a.arm_id JOIN {runs} run ON run.id = a.run_id "
        # By id alone, as the claim (_sql): the running attempts' index, which holds every
        # attempt that ran since the last vacuum, is no way in.
        f"WHERE a.id %(ids)s AND a.claim_token = %(token)s AND (a.status = '{AttemptStatus.RUNNING}') IS TRUE"
        + (" FOR UPDATE OF a" if vendor == "postgresql" else "")
    )
