"""Long-lived processes survive their database going away: the recovery sweep keeps sweeping,
and a worker reconnects for its next job instead of failing every job on a dead connection.

The outage is real: the server ends the process's own connection (pg_terminate_backend), as a
restart or a failover does."""

from __future__ import annotations

import logging

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from experiments.worker import AttemptWorker
from prbench.queues import get_connection, get_queue
from prbench.recovery import sweep_forever


def count_users() -> int:
    """A job that needs the database."""
    return get_user_model().objects.count()


def drop_our_connection() -> None:
    """End this process's database connection from the server side."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"], port=settings["PORT"], user=settings["USER"], dbname=settings["NAME"]
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.django_db(transaction=True)
def test_the_sweep_survives_a_dropped_connection_and_sweeps_again(caplog):
    reports = []
    drop_our_connection()
    with caplog.at_level(logging.WARNING):
        sweep_forever(0.01, report=reports.append, rounds=2)
    assert "recovery sweep failed" in caplog.text and "OperationalError" in caplog.text
    assert len(reports) == 1  # the round after the failure swept, on a new connection


@pytest.mark.django_db(transaction=True)
def test_a_worker_reconnects_between_jobs_after_the_database_dropped_it():
    queue = get_queue()
    count_users()  # the connection is open, as a worker's is after its first job
    drop_our_connection()
    jobs = [queue.enqueue(count_users), queue.enqueue(count_users)]
    AttemptWorker([queue], connection=get_connection()).work(burst=True)
    assert [job.get_status(refresh=True) for job in jobs] == ["finished", "finished"]
