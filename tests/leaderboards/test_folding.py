"""Summaries kept as chunks are recorded (summaries.fold_recorded): the same rows a rebuild
writes, exact sums whatever folds at once, and boards as new as the last recorded attempt."""

from __future__ import annotations

import math
import random
import threading
import time

import numpy as np
import pytest
from django.db import connection, transaction
from django.forms.models import model_to_dict

from experiments import signals
from experiments.models import Attempt
from leaderboards import sketches, summaries
from leaderboards.models import ArmSummary, TaskSummary
from leaderboards.summaries import fold_recorded, refresh_run_summaries, stale_arms
from tests.conftest import work_queue
from tests.factories import ArmPlan

PLANS = [
    ArmPlan("strong", quality=0.8, latency_ms=900, model_failure_rate=0.05, cached_rate=0.1),
    ArmPlan("weak", quality=0.3, latency_ms=300, infrastructure_failure_rate=0.2, model_failure_rate=0.1),
    ArmPlan("unpriced", quality=0.5, latency_ms=4000, price=None),
]


def _rows(run) -> dict:
    """The run's arm and task summaries as comparable values; sums of floats approximately
    (a fold adds them in another order than the rebuild's one pass)."""
    arms = {}
    for summary in ArmSummary.objects.filter(run=run):
        fields = model_to_dict(summary, exclude=["id", "refreshed_at"])
        arms[summary.arm_id] = {
            name: pytest.approx(value) if isinstance(value, float) else value for name, value in fields.items()
        }
    tasks = set(TaskSummary.objects.filter(run=run).values_list("arm_id", "task_id", "scored", "successes"))
    return {"arms": arms, "tasks": tasks}


def _fold_in_chunks(run, size: int) -> None:
    ids = list(Attempt.objects.filter(run=run, status__in=("completed", "failed")).values_list("pk", flat=True))
    random.Random(3).shuffle(ids)
    for start in range(0, len(ids), size):
        with transaction.atomic():
            fold_recorded(ids[start : start + size])


def test_folding_chunks_gives_what_a_rebuild_gives(built_run):
    run, arms = built_run(PLANS, repetitions=3)

    _fold_in_chunks(run, size=7)
    folded = _rows(run)
    refresh_run_summaries(run.pk)

    assert folded == _rows(run)
    assert len(folded["arms"]) == len(arms) and folded["tasks"]
    assert stale_arms(run.pk) == []  # the fold kept the fingerprint a reader compares


def test_the_boards_percentiles_are_within_the_sketchs_error_of_the_exact_ones(built_run):
    run, arms = built_run(PLANS, repetitions=3)
    _fold_in_chunks(run, size=5)

    for arm in arms.values():
        called = Attempt.objects.filter(arm=arm, response_cached=False, latency_ms__isnull=False)
        latencies = list(called.values_list("latency_ms", flat=True))
        summary = ArmSummary.objects.get(arm=arm)
        exact = np.percentile(latencies, range(101))
        assert summary.latency_quantiles == pytest.approx(list(exact), rel=sketches.RELATIVE_ACCURACY)
        first_tokens = list(called.exclude(first_token_ms=None).values_list("first_token_ms", flat=True))
        if first_tokens:
            assert summary.first_token_p50_ms == pytest.approx(np.median(first_tokens), rel=sketches.RELATIVE_ACCURACY)


def test_a_sketch_reads_any_quantile_within_its_stated_error_and_merges_by_adding():
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.lognormal(6, 1.5, 4000).round(), np.zeros(40), rng.uniform(0.5, 3, 100)])
    buckets = [
        math.ceil(math.log(v) / sketches.LN_GAMMA) if v >= sketches.SMALLEST else sketches.ZERO_BUCKET for v in values
    ]
    whole = sketches.count_buckets(buckets)
    halves = sketches.merge(sketches.count_buckets(buckets[::2]), sketches.count_buckets(buckets[1::2]))

    assert halves == whole
    fractions = np.linspace(0, 1, 201)
    estimated, exact = sketches.quantiles(whole, fractions), np.quantile(values, fractions)
    assert estimated == pytest.approx(list(exact), rel=sketches.RELATIVE_ACCURACY, abs=1e-9)
    assert sketches.quantiles({}, [0.5]) is None


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent folds are Postgres'")
@pytest.mark.django_db(transaction=True)
def test_workers_folding_chunks_of_one_run_at_once_still_sum_exactly(built_run):
    """Each fold holds its arms' rows until it commits: the next one waits, then adds to what
    the first wrote, new rows (the first chunk of an arm) included."""
    run, _ = built_run(PLANS, repetitions=2)
    ids = list(Attempt.objects.filter(run=run, status__in=("completed", "failed")).values_list("pk", flat=True))
    chunks = [ids[worker::4] for worker in range(4)]
    started = threading.Barrier(len(chunks))
    errors: list[BaseException] = []

    def worker(chunk: list[int]) -> None:
        try:
            started.wait(10)
            with transaction.atomic():
                fold_recorded(chunk)
                time.sleep(0.2)  # the others fold meanwhile, or wait for these rows
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    folded = _rows(run)
    refresh_run_summaries(run.pk)
    assert folded == _rows(run)


def test_a_board_read_after_recording_counts_every_recorded_attempt(experiment, start):
    """No rebuild at all (the run's end asks for one, disconnected here): what the boards read
    is what recording folded, as new as its last attempt, and not stale for an exact reader."""
    signals.run_changed.disconnect(dispatch_uid="leaderboards.refresh_changed")
    try:
        run = start(experiment)
        work_queue()
    finally:
        from leaderboards.hooks import refresh_changed

        signals.run_changed.connect(refresh_changed, dispatch_uid="leaderboards.refresh_changed")

    recorded = Attempt.objects.filter(run=run, status__in=("completed", "failed"))
    assert recorded.count() == run.attempts.count() > 0
    summaries = ArmSummary.objects.filter(run=run)
    counted = sum(s.model_successes + s.model_failures + s.infrastructure_failures for s in summaries)
    assert counted + sum(s.configuration_failures for s in summaries) == recorded.count()
    assert stale_arms(run.pk) == []
    folded = _rows(run)
    refresh_run_summaries(run.pk)
    assert folded == _rows(run)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a row's version (xmin) is Postgres'")
@pytest.mark.django_db(transaction=True)  # a row's version is the transaction that wrote it
def test_a_write_that_does_not_fold_leaves_the_summary_stale_for_an_exact_reader(built_run):
    run, arms = built_run(PLANS[:1])
    _fold_in_chunks(run, size=4)
    assert stale_arms(run.pk) == []

    Attempt.objects.filter(arm=arms["strong"], status="completed").update(cost_usd=1)  # re-priced

    assert stale_arms(run.pk) == [arms["strong"].pk]


def test_a_whole_number_alone_in_its_bucket_is_read_back_exactly():
    """Latencies are whole milliseconds; below ~50 ms a bucket holds one: a p95 of 40 ms reads
    40, not the bucket's middle (40.05), which a gate's 0.04 s limit would fail."""
    from leaderboards import sketches

    sketch = {str(math.ceil(math.log(40) / sketches.LN_GAMMA)): 20}  # as SQL buckets 40
    assert sketches.quantile(sketch, 0.95, whole=True) == 40.0
    assert sketches.quantile(sketch, 0.95) != 40.0  # the middle, within 1%
    big = {str(math.ceil(math.log(2650) / sketches.LN_GAMMA)): 3}  # a bucket of ~53 whole numbers
    assert abs(sketches.quantile(big, 0.5, whole=True) - 2650) <= 0.01 * 2650


@pytest.mark.django_db(transaction=True)
def test_attempts_ended_by_the_claim_limit_are_folded_as_they_end(experiment, start, settings):
    """A claim that retires an attempt (handed out too often without a result) ends it without a
    record: the boards count it at once, as the platform's failure, and are not stale."""
    from experiments.pipeline import claim_attempts

    run = start(experiment, inference_only=True)
    poisoned = run.attempts.order_by("sequence").first()
    Attempt.objects.filter(pk=poisoned.pk).update(claims=settings.PRBENCH_MAX_ATTEMPT_CLAIMS)
    _token, claimed = claim_attempts([poisoned.pk])

    assert claimed == [] and Attempt.objects.get(pk=poisoned.pk).status == "failed"
    summary = ArmSummary.objects.get(arm_id=poisoned.arm_id)
    assert (summary.infrastructure_failures, summary.infrastructure_causes) == (1, {"platform_error": 1})
    assert stale_arms(run.pk) == []


def test_postgres_folds_in_one_statement_the_rows_the_python_fold_writes(built_run, django_assert_max_num_queries):
    """A guard: Postgres' fold is one prepared statement after its turn (_fold_in_one_statement),
    and it writes what the chunk's aggregates read into Python and upserted wrote."""
    run, _ = built_run(PLANS, repetitions=3)
    ids = list(Attempt.objects.filter(run=run, status__in=("completed", "failed")).values_list("pk", flat=True))
    random.Random(5).shuffle(ids)
    chunks = [ids[start : start + 6] for start in range(0, len(ids), 6)]

    with transaction.atomic():
        for chunk in chunks:
            summaries._fold_in_python(chunk)
        by_python = _rows(run)
        transaction.set_rollback(True)
    for chunk in chunks:
        with transaction.atomic(), django_assert_max_num_queries(4):  # PREPAREs on a connection's first
            fold_recorded(chunk)

    assert _rows(run) == by_python
    assert by_python["arms"] and by_python["tasks"]


def test_a_sketch_is_stored_as_an_array_subscripted_by_bucket():
    sketch = {"-700": 3, "12": 1, "15": 2}

    text = sketches.as_array_text(sketch)

    assert text == "[-700:15]={3," + "NULL," * 711 + "1,NULL,NULL,2}"
    assert sketches.from_array_text(text) == sketch
    assert sketches.from_array_text("{4,NULL,5}") == {"1": 4, "3": 5}  # a lower bound of 1 goes unwritten
    assert sketches.as_array_text({}) == "{}" and sketches.from_array_text("{}") == {}


def test_zero_and_far_apart_latencies_fold_into_the_array_as_a_rebuild_counts_them(built_run):
    run, _ = built_run(PLANS[:1], repetitions=3)
    called = list(
        Attempt.objects.filter(run=run, response_cached=False, latency_ms__isnull=False).values_list("pk", flat=True)
    )
    Attempt.objects.filter(pk__in=called[::3]).update(latency_ms=0)
    Attempt.objects.filter(pk__in=called[1::3]).update(latency_ms=600_000)

    _fold_in_chunks(run, size=4)

    summary = ArmSummary.objects.get(run=run)
    assert summary.latency_sketch[str(sketches.ZERO_BUCKET)] == len(called[::3])
    assert summary.latency_quantiles is not None and summary.latency_quantiles[0] == 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_typeof(latency_sketch)::text FROM leaderboards_armsummary WHERE id = %s", [summary.pk]
            )
            assert cursor.fetchone() == ("integer[]",)
    folded = _rows(run)
    refresh_run_summaries(run.pk)
    assert folded == _rows(run)


def test_folding_into_a_summary_rebuilt_before_anything_was_recorded_adds_to_its_empty_histogram(built_run):
    """A guard: an arm rebuilt with nothing recorded has the defaults, an empty histogram and
    empty sketches; the chunks folded into it give what a rebuild gives."""
    run, arms = built_run(PLANS[:2], repetitions=2)
    TaskSummary.objects.filter(run=run).delete()
    ArmSummary.objects.filter(run=run).delete()
    ArmSummary.objects.bulk_create(ArmSummary(run=run, arm=arm, refreshed_at=run.created_at) for arm in arms.values())
    assert [(s.latency_histogram, s.latency_sketch) for s in ArmSummary.objects.filter(run=run)] == [([], {})] * len(
        arms
    )

    _fold_in_chunks(run, size=5)

    folded = _rows(run)
    refresh_run_summaries(run.pk)
    assert folded == _rows(run)
