"""The bulk hot path under concurrent jobs: chunks of tens of attempts claimed in one statement,
recorded in one, their calls counted and answers journalled per chunk, while other jobs steal
from the same run. Every attempt is claimed once, called once and recorded once."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest
from django.db import connection

from experiments import claiming, pipeline
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.jobs import execute_attempts, warm_attempt_pool
from experiments.models import AttemptStatus, RunStatus
from prbench import metrics
from prbench.queues import get_connection

JOBS = 3
REPETITIONS = 40


def two_fast_arms(org, dataset, alice, labels: tuple[str, str], repetitions: int):
    """A started inference-only run of two zero-latency oracle arms on four tasks, each arm with
    slots enough that its limit never shapes the chunks."""
    fast = {"mode": "oracle", "max_concurrency": 256}
    arms = [ArmSpec(label, "mock", f"mock-{index}", fast) for index, label in enumerate(labels)]
    spec = ExperimentSpec(
        name=" ".join(labels), dataset=dataset, arms=arms, sample_size=4, repetitions=repetitions, seed=3
    )
    return do_start_run(do_save_experiment(org, spec, alice), inference_only=True)


@pytest.mark.django_db(transaction=True)
def test_concurrent_jobs_claim_record_and_pay_for_each_attempt_once(org, dataset, alice, settings, monkeypatch):
    from providers.adapters.mock.adapter import MockAdapter

    settings.PRBENCH_THREADS_PER_JOB = 4
    run = two_fast_arms(org, dataset, alice, ("one", "two"), REPETITIONS)
    ids = list(run.attempts.order_by("sequence").values_list("pk", flat=True))

    calls: Counter[str] = Counter()
    lock = threading.Lock()
    generate = MockAdapter.generate

    def counted(self, request):
        with lock:
            calls[request.seed_key] += 1
        return generate(self, request)

    chunks: list[int] = []
    claim_rows = claiming.claim_rows

    def watched(attempt_ids, *args):
        chunks.append(len(attempt_ids))
        return claim_rows(attempt_ids, *args)

    monkeypatch.setattr(MockAdapter, "generate", counted)
    monkeypatch.setattr(pipeline, "claim_rows", watched)

    def job(attempt_ids: list[int]) -> None:
        try:
            execute_attempts(run.pk, attempt_ids)
        finally:
            connection.close()

    finished_before = _finished_count()
    warm_attempt_pool()  # as a worker does before its first job; the three jobs share it
    # Three jobs at once on one run, as three workers would take its first three jobs: each
    # takes its own attempts and then steals the others', racing for the same rows.
    threads = [threading.Thread(target=job, args=(ids[index::JOBS],)) for index in range(JOBS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    pipeline.finish_run_if_done(run.pk)

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    rows = list(run.attempts.values_list("status", "claims", "repeat_calls"))
    assert rows == [(AttemptStatus.COMPLETED, 1, 0)] * len(ids)  # each claimed once, nothing called again
    assert len(calls) == len(ids) and set(calls.values()) == {1}  # the provider answered each once
    # Recorded once each: a record counts the attempts its own UPDATE moved to finished, in its
    # transaction, so a second record of any attempt would count it again.
    assert _finished_count() - finished_before == len(ids)
    assert max(chunks) > settings.PRBENCH_THREADS_PER_JOB  # the bulk path: chunks beyond the threads
    journal = get_connection().keys("prbench:answer*")
    assert journal == []  # counts and answers forgotten once recorded


def _finished_count() -> float:
    """Every finished attempt counted so far in this process (prbench.metrics)."""
    return sum(
        sample.value
        for family in metrics.ATTEMPTS_FINISHED.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
    )


@pytest.mark.django_db(transaction=True)
def test_an_arm_first_handed_out_in_a_deep_chunk_loses_none_of_the_chunk(org, dataset, alice, settings):
    """A job deep in a fast arm's attempts (FAST_DEPTH per thread) reaches another arm's first
    ones: handing that arm out ends the depth in the middle of the chunk, and every attempt of
    the chunk must still go to the pool (one once stayed claimed, never run, never recorded)."""
    from django.db.models import F

    from experiments.models import Attempt

    settings.PRBENCH_THREADS_PER_JOB = 2
    run = two_fast_arms(org, dataset, alice, ("first", "later"), 10)
    # The first arm's attempts first in execution order, then the other's.
    Attempt.objects.filter(run=run, arm__label="later").update(sequence=F("sequence") + 100_000)
    warm_attempt_pool()
    execute_attempts(run.pk, list(run.attempts.values_list("pk", flat=True)))
    pipeline.finish_run_if_done(run.pk)

    assert set(run.attempts.values_list("status", flat=True)) == {AttemptStatus.COMPLETED}


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_claim_and_its_records_lock_reach_their_attempts_by_id_however_stale_the_statistics(org, dataset, alice):
    """A claim of 8 attempts and the record's lock of them each read those 8 rows by id, not a
    range of the run's attempts. A new run's attempts are not in the table's statistics (never
    analysed here, as after a bulk insert into a large table before autovacuum comes), and
    Postgres used to reach them through the run's queued range, or through every attempt that
    ran since the last vacuum, filtering out all the others each time: a run's claims cost its
    size squared."""
    run = two_fast_arms(org, dataset, alice, ("one", "two"), 250)  # 2,000 queued attempts
    by_sequence = list(run.attempts.order_by("sequence").values_list("pk", flat=True))
    mine, others = by_sequence[-8:], by_sequence[:1000]
    run.attempts.filter(pk__in=others).update(status=AttemptStatus.RUNNING)  # other jobs' calls
    token = uuid.uuid4()
    _assert_reads_only_by_id(_statement(lambda: claiming.claim_rows(mine, token, "tester", 3)))
    claiming.claim_rows(mine, token, "tester", 3)
    _assert_reads_only_by_id(_statement(lambda: claiming.lock_held(mine, token)))


def _statement(work) -> str:
    """The SQL text of the one statement on attempts ``work`` runs, its writes rolled back."""
    from django.db import transaction
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        work()
        transaction.set_rollback(True)
    (sql,) = [query["sql"] for query in captured.captured_queries if "experiments_attempt" in query["sql"]]
    return sql


def _assert_reads_only_by_id(sql: str) -> None:
    """``sql`` reads the 8 attempts it names through the primary key and no other row. A
    sequential scan is ruled out: at this size it can be the cheapest, at a million not."""
    from django.db import transaction

    with connection.cursor() as cursor, transaction.atomic():
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'experiments_attempt'")
        attempt_indexes = {name for (name,) in cursor.fetchall()}
        transaction.set_rollback(True)
    nodes = _plan_nodes(plan[0]["Plan"])
    used = {node["Index Name"] for node in nodes if "Index Name" in node}
    assert used & attempt_indexes == {"experiments_attempt_pkey"}
    scans = [
        node for node in nodes if node.get("Relation Name") == "experiments_attempt" and "Scan" in node["Node Type"]
    ]
    assert [(scan["Actual Rows"], scan.get("Rows Removed by Filter", 0)) for scan in scans] == [(8, 0)]


def _plan_nodes(node: dict) -> list[dict]:
    return [node, *(found for child in node.get("Plans", []) for found in _plan_nodes(child))]
