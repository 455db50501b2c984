"""The squashed migrations stand in for their originals whatever a database has applied.

Each case hands Django's migration loader a list of applied migrations (no database is read)
and checks the plan ``migrate`` would run: a new database takes the squashes, one at the
previous release has nothing left of them to apply, and one stopped half way finishes with
the originals. The schema and seeded rows a squash makes are compared with the originals'
by hand, with ``pg_dump``, when a squash is made (see README, "Upgrading").
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations import Migration
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

OUR_APPS = {"orgs", "providers", "evaluation", "datasets", "experiments", "leaderboards"}
Key = tuple[str, str]


def disk_migrations() -> dict[Key, Migration]:
    return MigrationLoader(None, ignore_no_migrations=True).disk_migrations


def squashes() -> dict[Key, Migration]:
    return {key: migration for key, migration in disk_migrations().items() if migration.replaces}


def originals() -> set[Key]:
    return {key for key, migration in disk_migrations().items() if not migration.replaces}


def plan_with_applied(monkeypatch: pytest.MonkeyPatch, applied: set[Key]) -> list[Key]:
    """What ``migrate`` would apply to a database whose migration table holds ``applied``."""
    monkeypatch.setattr(MigrationRecorder, "applied_migrations", lambda self: dict.fromkeys(applied))
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [(migration.app_label, migration.name) for migration, _backwards in plan]


def test_every_app_of_ours_but_datasets_is_squashed():
    assert {app for app, _name in squashes()} == OUR_APPS - {"datasets"}


def test_each_squash_replaces_migrations_that_exist():
    on_disk = originals()
    for key, squash in squashes().items():
        missing = set(squash.replaces) - on_disk
        assert not missing, f"{key} replaces {missing}, which are not on disk"


def test_the_datasets_move_stays_outside_the_squashes():
    """A database from before the move has experiments at 0042 and no datasets migration: the
    move's state-only migrations must run there as they are."""
    replaced = {key for squash in squashes().values() for key in squash.replaces}
    move = {
        ("datasets", "0001_initial"),
        ("leaderboards", "0005_task_is_a_datasets_model"),
        ("experiments", "0043_task_supply_moves_to_datasets"),
    }
    assert not move & replaced


def test_a_new_database_runs_the_squashes(monkeypatch):
    plan = plan_with_applied(monkeypatch, set())
    ours = [key for key in plan if key[0] in OUR_APPS]
    assert set(squashes()) <= set(ours)
    replaced = {key for squash in squashes().values() for key in squash.replaces}
    assert not replaced & set(ours)


def test_a_database_at_the_previous_release_runs_nothing_the_squashes_cover(monkeypatch):
    replaced = {key for squash in squashes().values() for key in squash.replaces}
    applied = {key for key in originals() if key[0] not in OUR_APPS} | replaced

    plan = plan_with_applied(monkeypatch, applied)

    assert ("experiments", "0043_task_supply_moves_to_datasets") in plan
    assert not set(plan) & (replaced | set(squashes()))


def test_a_database_stopped_half_way_finishes_with_the_originals(monkeypatch):
    experiments_up_to_0030 = {key for key in originals() if key[0] == "experiments" and int(key[1][:4]) <= 30}
    applied = {key for key in originals() if key[0] not in OUR_APPS} | experiments_up_to_0030
    applied |= {("orgs", "0001_initial"), ("orgs", "0002_invitation"), ("evaluation", "0001_initial")}
    applied |= {key for key in originals() if key[0] == "providers" and int(key[1][:4]) <= 6}

    plan = plan_with_applied(monkeypatch, applied)

    assert ("experiments", "0031_attempt_confidence") in plan
    assert ("experiments", "0042_runarm_misconfigured") in plan
    assert ("evaluation", "0002_verdict_run") in plan
    assert ("providers", "0009_price_1h_cache_long_context") in plan
    partly_applied = {key for key, squash in squashes().items() if set(squash.replaces) & applied}
    assert not partly_applied & set(plan)
    assert not applied & set(plan)
