"""Per-run summaries: equal to a direct aggregation over the attempts, rebuilt idempotently,
refreshed on a throttle and at a run's end."""

from __future__ import annotations

import itertools
import queue
import random
import threading
import time
from collections import Counter
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Case, Value, When
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from experiments import signals
from experiments.actions import do_pause_run, do_start_run
from experiments.models import Attempt
from leaderboards import jobs
from leaderboards.aggregation import (
    LATENCY_BUCKETS_MS,
    MODEL_SCORED,
    additive_totals,
    attempts_fingerprint,
    sketch_buckets,
    totals_by,
)
from leaderboards.models import ArmEvaluatorSummary, ArmSummary, TaskSummary
from leaderboards.sketches import RELATIVE_ACCURACY
from leaderboards.summaries import refresh_run_summaries, take_refresh_turn
from prbench.queues import get_queue
from tests.conftest import work_queue
from tests.factories import ZERO_LATENCY_ARMS, ArmPlan

PLANS = [
    ArmPlan("strong", quality=0.8, latency_ms=900, model_failure_rate=0.05, cached_rate=0.1),
    ArmPlan("weak", quality=0.3, latency_ms=300, infrastructure_failure_rate=0.2, model_failure_rate=0.1),
    ArmPlan("unpriced", quality=0.5, latency_ms=4000, price=None),
]


def _expected(attempts: list[dict]) -> dict:
    """The arm's figures computed here, from its attempt rows, without any SQL aggregate."""
    scored = [a for a in attempts if a["outcome"] in ("model_success", "model_failure")]
    answers = [a for a in attempts if a["outcome"] == "model_success"]
    called = [a for a in attempts if not a["response_cached"] and a["status"] == "completed"]
    latencies = [a["latency_ms"] for a in called]
    edges = [0, *LATENCY_BUCKETS_MS, np.inf]
    return {
        "scored": len(scored),
        "scored_tasks": len({a["task_id"] for a in scored}),
        "model_successes": len(answers),
        "model_failures": len(scored) - len(answers),
        "infrastructure_failures": len(attempts) - len(scored),
        "infrastructure_causes": dict(
            Counter(a["error_category"] for a in attempts if a["outcome"] == "infrastructure_failure")
        ),
        "resolved": sum(bool(a["resolved"]) for a in answers),
        "cached": sum(a["response_cached"] for a in scored),
        "regressions": sum(a["pass_to_pass_regressions"] for a in answers),
        "lines_changed_sum": sum(a["lines_changed"] for a in answers),
        "latency_measured": len(latencies),
        # Read off the sketches: within their stated error of the exact percentiles.
        "latency_quantiles": pytest.approx(list(np.percentile(latencies, range(101))), rel=RELATIVE_ACCURACY),
        "latency_histogram": [sum(low <= x < high for x in latencies) for low, high in itertools.pairwise(edges)],
        "first_token_p50_ms": pytest.approx(np.median([a["first_token_ms"] for a in called]), rel=RELATIVE_ACCURACY),
        "tokens_per_s_median": pytest.approx(
            np.median([a["output_tokens_per_s"] for a in called]), rel=RELATIVE_ACCURACY
        ),
        "answered_called": len(called),
        "unpriced": sum(a["cost_usd"] is None for a in called),
        "resolved_called": sum(bool(a["resolved"]) for a in called),
    }


def test_summaries_equal_a_direct_aggregation_over_the_attempts(built_run, django_assert_max_num_queries):
    run, arms = built_run(PLANS, repetitions=3, verdicts=True)

    with django_assert_max_num_queries(19):  # whatever the number of attempts
        assert refresh_run_summaries(run.pk)

    rows = list(Attempt.objects.filter(run=run).values())
    for label, arm in arms.items():
        attempts = [a for a in rows if a["arm_id"] == arm.pk]
        summary = ArmSummary.objects.get(arm=arm)
        expected = _expected(attempts)
        assert {field: getattr(summary, field) for field in expected} == expected, label
        called = [a for a in attempts if not a["response_cached"] and a["status"] == "completed"]
        if label == "unpriced":
            assert summary.unpriced == len(called) and summary.cost_usd is None
        else:
            assert summary.cost_usd == sum(a["cost_usd"] for a in called)
            assert summary.cost_squares == pytest.approx(sum(float(a["cost_usd"]) ** 2 for a in called))
        per_task = Counter((a["task_id"]) for a in attempts if a["outcome"] in ("model_success", "model_failure"))
        wins = Counter(a["task_id"] for a in attempts if a["resolved"] and a["outcome"] == "model_success")
        stored = {t.task_id: (t.scored, t.successes) for t in TaskSummary.objects.filter(arm=arm)}
        assert stored == {task: (count, wins[task]) for task, count in per_task.items()}, label


def test_evaluator_summaries_keep_what_the_bootstrap_resamples(built_run):
    run, _ = built_run(PLANS[:1], repetitions=2, verdicts=True)
    refresh_run_summaries(run.pk)

    (summary,) = ArmEvaluatorSummary.objects.filter(run=run)
    scores = list(run.attempts.filter(verdicts__status="judged").values_list("verdicts__overall", flat=True))
    assert summary.judged == len(scores) == sum(summary.overall_counts)
    assert summary.overall_sum == sum(scores)
    assert Counter(scores) == {score: n for score, n in enumerate(summary.overall_counts) if n}
    assert summary.cost_usd == Decimal("0.0002") * len(scores) and summary.unpriced == 0


def test_an_arm_without_attempts_still_has_a_summary(built_run):
    run, _ = built_run(PLANS[:1])
    run.arms.create(label="idle", provider="mock", model_name="m", position=9)
    refresh_run_summaries(run.pk)

    idle = ArmSummary.objects.get(run=run, arm__label="idle")
    assert (idle.scored, idle.resolved, idle.latency_quantiles, idle.cost_usd) == (0, 0, None, None)


def _snapshot(run) -> list[dict]:
    skip = {"id", "refreshed_at"}
    return [
        {k: v for k, v in model_to_dict(row).items() if k not in skip}
        for model in (ArmSummary, ArmEvaluatorSummary, TaskSummary)
        for row in model.objects.filter(run=run).order_by("arm_id", "pk")
    ]


def _varied(run) -> None:
    """Every kind of row a rebuild keys on: causes with and without a category, a
    configuration failure, an answer awaiting its verdict, latencies on the histogram's edges
    and past its last one, a cached call that still took time, a fuzzed patch, a cancelled
    attempt and one still queued (neither recorded)."""
    answers = list(Attempt.objects.filter(run=run, status="completed").order_by("pk"))
    edits: list[dict[str, Any]] = [
        {"outcome": "infrastructure_failure", "error_category": "", "status": "failed"},
        {"outcome": "infrastructure_failure", "error_category": "connection", "status": "failed"},
        {"outcome": "configuration_failure", "error_category": "model_not_found", "status": "failed"},
        {"outcome": "configuration_failure", "error_category": "bad_request", "status": "failed"},
        {"resolved": None},
        {"latency_ms": 0, "first_token_ms": 0, "output_tokens_per_s": 0.0},
        {"latency_ms": 99},
        {"latency_ms": 100},
        {"latency_ms": 2500},
        {"latency_ms": 250_000},
        {"response_cached": True, "latency_ms": 40},
        {"apply_method": "patch_fuzz"},
        {"status": "cancelled", "outcome": ""},
        {"status": "queued", "outcome": "", "latency_ms": None},
    ]
    for index, fields in enumerate(edits):
        Attempt.objects.filter(pk__in=[a.pk for a in answers[index::40]]).update(**fields)


def _counted_one_by_one(run) -> tuple[dict, set]:
    """Each arm's summary fields as additive_totals() counts them with a FILTER per key and
    the sketches from each attempt's own bucket, and the (arm, task) counts: none of the
    rebuild's grouping."""
    attempts = Attempt.objects.filter(run=run)
    arms = {
        row.pop("arm_id"): row
        for row in totals_by(attempts, "arm_id", totals=additive_totals(), also=attempts_fingerprint())
    }
    for arm in arms.values():
        for name in ("infrastructure_causes", "configuration_causes"):
            arm[name] = {cause: count for cause, count in arm[name].items() if count}
        if not any(arm["latency_histogram"]):
            arm["latency_histogram"] = []  # the field's default: no answer measured
        arm.update({name: {} for name in sketch_buckets()})
    for arm_id, *buckets in attempts.annotate(**sketch_buckets()).values_list("arm_id", *sketch_buckets()):
        for name, index in zip(sketch_buckets(), buckets, strict=True):
            if index is not None:
                sketch = arms[arm_id].setdefault(name, {})
                sketch[str(index)] = sketch.get(str(index), 0) + 1
    scored = [a for a in attempts.filter(MODEL_SCORED).values("arm_id", "task_id", "resolved")]
    per_task = Counter((a["arm_id"], a["task_id"]) for a in scored)
    wins = Counter((a["arm_id"], a["task_id"]) for a in scored if a["resolved"])
    return arms, {(*key, count, wins[key]) for key, count in per_task.items()}


def _stored(run, expected: dict) -> tuple[dict, set]:
    arms = {}
    for summary in ArmSummary.objects.filter(run=run):
        arms[summary.arm_id] = {name: getattr(summary, name) for name in expected.get(summary.arm_id, {})}
    tasks = set(TaskSummary.objects.filter(run=run).values_list("arm_id", "task_id", "scored", "successes"))
    return arms, tasks


def test_a_rebuild_equals_the_totals_counted_attempt_by_attempt(built_run):
    """A guard for the rebuild's grouping (its causes, histogram and sketches counted per key,
    its sums added up per cause, its (arm, task) rows written as they changed): what it stores
    is what a FILTER per key counts over the same attempts, before and after they change."""
    _check_rebuilds(built_run, aside=False)


@pytest.mark.django_db(transaction=True)
def test_a_rebuild_reads_the_totals_on_a_connection_of_its_own_and_still_equals_them(built_run):
    """Outside a transaction the arms' totals are read beside the rest, on another connection
    in the snapshot the refresh exported: not on the refresh's own, and to the same figures."""
    _check_rebuilds(built_run, aside=True)


def _check_rebuilds(built_run, aside: bool) -> None:
    plans = [*PLANS, ArmPlan("agent", quality=0.6, latency_ms=2000, agent=True, infrastructure_failure_rate=0.1)]
    run, arms = built_run(plans, repetitions=3, verdicts=True)
    _varied(run)

    for change in range(3):
        with CaptureQueriesContext(connection) as queries:
            assert refresh_run_summaries(run.pk)
        totals_here = any('AS "total__attempts_version"' in query["sql"] for query in queries.captured_queries)
        assert totals_here is not aside

        expected, tasks = _counted_one_by_one(run)
        stored, stored_tasks = _stored(run, expected)
        assert set(stored) == set(arms[label].pk for label in arms)
        for arm_id, fields in expected.items():
            approximate = {
                name: pytest.approx(value) if isinstance(value, float) else value for name, value in fields.items()
            }
            assert stored[arm_id] == approximate, arm_id
        assert stored_tasks == tasks
        assert len({key[:2] for key in tasks}) == len(tasks) > 0
        scored_tasks = Counter(arm_id for arm_id, *_ in tasks)
        assert {s.arm_id: s.scored_tasks for s in ArmSummary.objects.filter(run=run)} == {
            arm.pk: scored_tasks[arm.pk] for arm in arms.values()
        }
        if change == 0:  # one (arm, task) loses every attempt, another flips its verdicts
            arm_id, task_id, *_ = min(tasks)
            Attempt.objects.filter(arm_id=arm_id, task_id=task_id).delete()
            arm_id, task_id, *_ = max(tasks)
            flipped = Attempt.objects.filter(arm_id=arm_id, task_id=task_id, outcome="model_success")
            flipped.update(resolved=Case(When(resolved=True, then=Value(False)), default=Value(True)))
        elif change == 1:  # a whole arm loses its attempts: its summary stays, empty
            Attempt.objects.filter(arm=arms["weak"]).delete()


def test_a_rebuild_in_a_callers_transaction_leaves_its_planner_as_it_was(built_run):
    """The arms' totals are grouped with sorting turned off for their one statement: the
    caller's transaction plans its own statements afterwards as before."""
    run, _ = built_run(PLANS[:1])
    with connection.cursor() as cursor:
        refresh_run_summaries(run.pk)  # in the test's transaction: the totals are read here
        cursor.execute("SHOW enable_sort")
        assert cursor.fetchone()[0] == "on"


def test_a_refresh_is_idempotent(built_run):
    run, _ = built_run(PLANS, verdicts=True)
    refresh_run_summaries(run.pk)
    first = _snapshot(run)

    refresh_run_summaries(run.pk)
    jobs.refresh_summaries(run.pk)

    assert _snapshot(run) == first
    assert ArmSummary.objects.filter(run=run).count() == len(PLANS)


def test_a_refresh_of_a_deleted_run_does_nothing(built_run):
    run, _ = built_run(PLANS[:1])
    run_id = run.pk
    run.delete()
    assert refresh_run_summaries(run_id) is False


def _summary_jobs() -> list:
    return [job for job in get_queue().get_jobs() if job.id.startswith("summaries-")]


def test_refreshes_are_throttled_and_none_is_lost(built_run, clean_redis, monkeypatch):
    run, _ = built_run(PLANS[:1])

    assert jobs.request_summary_refresh([run.pk]) == [run.pk]
    assert jobs.request_summary_refresh([run.pk, run.pk]) == []  # within the window: no second job
    assert len(_summary_jobs()) == 1
    assert clean_redis.sismember(jobs.OUT_OF_DATE, run.pk)

    work_queue()
    assert ArmSummary.objects.filter(run=run).exists()
    assert not clean_redis.sismember(jobs.OUT_OF_DATE, run.pk)

    # Recorded into again inside the window: marked, not queued; the sweep queues it once the
    # window is over.
    assert jobs.request_summary_refresh([run.pk]) == []
    assert jobs.refresh_out_of_date() == []
    clean_redis.delete(jobs._throttle_key(run.pk))  # the window ends
    assert jobs.refresh_out_of_date() == [run.pk]
    assert len(_summary_jobs()) == 1


def test_the_throttle_window_is_short(built_run, monkeypatch):
    import time

    run, _ = built_run(PLANS[:1])
    monkeypatch.setattr(jobs, "REFRESH_EVERY_MS", 100)
    assert jobs.request_summary_refresh([run.pk]) == [run.pk]
    time.sleep(0.2)
    assert jobs.request_summary_refresh([run.pk]) == [run.pk]


def test_a_slow_refresh_keeps_the_next_one_away_for_longer(built_run, clean_redis, monkeypatch):
    run, _ = built_run(PLANS[:1])
    # A refresh of a few ms here stands for one of seconds on a run of a million attempts.
    monkeypatch.setattr(jobs, "REFRESH_PAUSE_FACTOR", 10_000)

    jobs.refresh_summaries(run.pk)

    assert clean_redis.pttl(jobs._throttle_key(run.pk)) > jobs.REFRESH_EVERY_MS
    assert jobs.request_summary_refresh([run.pk]) == []  # recorded into: marked, not queued
    assert clean_redis.sismember(jobs.OUT_OF_DATE, run.pk)


def test_the_pause_after_a_refresh_is_four_times_its_length_or_the_window():
    assert jobs.pause_after_refresh(0.05) == jobs.REFRESH_EVERY_MS
    assert jobs.pause_after_refresh(4.7) == 18_800


def test_an_export_rebuilds_summaries_only_when_out_of_date_or_redis_cannot_say(built_run, clean_redis, monkeypatch):
    run, _ = built_run(PLANS[:1])
    jobs.ensure_fresh_summaries(run.pk)  # none yet: built
    built = ArmSummary.objects.get(run=run).refreshed_at

    jobs.ensure_fresh_summaries(run.pk)  # fresh: kept
    assert ArmSummary.objects.get(run=run).refreshed_at == built

    clean_redis.sadd(jobs.OUT_OF_DATE, run.pk)
    jobs.ensure_fresh_summaries(run.pk)
    rebuilt = ArmSummary.objects.get(run=run).refreshed_at
    assert rebuilt > built and not clean_redis.sismember(jobs.OUT_OF_DATE, run.pk)

    from redis.exceptions import ConnectionError

    def down():
        raise ConnectionError("no Redis")

    monkeypatch.setattr(jobs, "get_connection", down)
    jobs.ensure_fresh_summaries(run.pk)
    assert ArmSummary.objects.get(run=run).refreshed_at > rebuilt


def test_a_run_that_finishes_is_refreshed_and_recording_asks_for_no_rebuild(
    experiment, start, django_capture_on_commit_callbacks
):
    """Recorded attempts are folded into the summaries in their own transaction: nothing asks
    for a rebuild after the commit (the run's end still does)."""
    run = start(experiment)
    with django_capture_on_commit_callbacks() as callbacks:
        work_queue()  # records the attempts, finishes the run, then runs the refresh that queued

    run.refresh_from_db()
    assert run.status == "completed"
    labels = {arm.label for arm in ZERO_LATENCY_ARMS}
    assert {s.arm.label: s.scored for s in ArmSummary.objects.filter(run=run)} == dict.fromkeys(labels, 4)
    assert not [cb for cb in callbacks if getattr(cb, "func", None) is signals.announce_recorded]


def test_a_refresh_never_fails_its_caller_when_redis_is_down(built_run, monkeypatch):
    from redis.exceptions import ConnectionError

    def down():
        raise ConnectionError("no Redis")

    monkeypatch.setattr(jobs, "get_connection", down)
    run, _ = built_run(PLANS[:1])
    assert jobs.request_summary_refresh([run.pk]) == []
    assert jobs.queue_summary_refresh(run.pk) is False


def test_recompute_leaderboards_rebuilds_every_run_or_one(built_run, experiment, dataset, capsys):
    first, _ = built_run(PLANS[:1])
    second, _ = built_run(PLANS[:1], seed=6)

    call_command("recompute_leaderboards", "--run", str(second.code))
    assert not ArmSummary.objects.filter(run=first).exists() and ArmSummary.objects.filter(run=second).exists()

    call_command("recompute_leaderboards")
    assert ArmSummary.objects.filter(run=first).exists()
    assert "rebuilt the summaries of 2 run(s)" in capsys.readouterr().out


def test_a_page_asks_for_a_refresh_only_while_its_run_is_out_of_date(built_run, clean_redis):
    run, _ = built_run(PLANS[:1])
    assert jobs.refresh_if_out_of_date(run.pk) is False  # never recorded into: nothing to do

    jobs.request_summary_refresh([run.pk])  # recorded into: queued, and marked
    assert jobs.refresh_if_out_of_date(run.pk) is False  # within the window
    clean_redis.delete(jobs._throttle_key(run.pk))
    assert jobs.refresh_if_out_of_date(run.pk) is True
    work_queue()
    assert jobs.refresh_if_out_of_date(run.pk) is False  # refreshed: no longer marked


def _hold_the_run(run_id: int, held: threading.Event, release: threading.Event, while_held=None) -> None:
    """A refresh under way, in a connection of its own: the run's refresh turn held until
    released, ``while_held`` done in that transaction (the summaries it is writing)."""
    try:
        with transaction.atomic():
            assert take_refresh_turn(run_id)
            if while_held is not None:
                while_held()
            held.set()
            release.wait(10)
    finally:
        connection.close()


def _record_an_answer(attempt_id: int, lines: int) -> None:
    """What recording an answer writes, committed at once (the mark comes after, if ever)."""
    Attempt.objects.filter(pk=attempt_id).update(
        status="completed", outcome="model_success", resolved=True, patch_well_formed=True, lines_changed=lines
    )


def _lines_on_the_board(run_id: int) -> int:
    return sum(ArmSummary.objects.filter(run_id=run_id).values_list("lines_changed_sum", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_reader_counts_an_answer_committed_before_its_mark_while_a_refresh_is_under_way(experiment, clean_redis):
    """The run is unmarked (the refresh under way took the mark) and the last answer has
    committed, its mark not yet set: the board printed must still count it."""
    run = do_start_run(experiment)
    refresh_run_summaries(run.pk)
    attempt_id = Attempt.objects.filter(run=run).values_list("pk", flat=True).first()
    held, release = threading.Event(), threading.Event()
    refresh = threading.Thread(target=_hold_the_run, args=(run.pk, held, release))
    refresh.start()
    assert held.wait(10)
    _record_an_answer(attempt_id, lines=7)
    threading.Timer(0.3, release.set).start()
    jobs.ensure_fresh_summaries(run.pk)
    refresh.join(10)
    assert _lines_on_the_board(run.pk) == 7
    assert not clean_redis.sismember(jobs.OUT_OF_DATE, run.pk)


@pytest.mark.django_db(transaction=True)
def test_a_board_read_while_refreshes_race_the_recording_is_never_stale(experiment, clean_redis):
    """Answers recorded one after another, each marking the run a moment after it commits, as
    the attempt job's commit hook does; the worker's refresh job running all the while; and a
    reader (an export, the gate, start_run --wait) reading the boards as soon as each answer
    has committed, before its mark. Whatever had committed, the board it reads counts."""
    run = do_start_run(experiment)
    refresh_run_summaries(run.pk)
    attempt_id = Attempt.objects.filter(run=run).values_list("pk", flat=True).first()
    done, refreshed, read = threading.Event(), threading.Event(), threading.Event()
    committed: queue.Queue[int | None] = queue.Queue()
    stale: list[str] = []

    def refresh_now_and_then():  # the worker's refresh job, throttled (more often than in production)
        try:
            while not done.is_set():
                jobs.refresh_summaries(run.pk)
                refreshed.set()
                time.sleep(random.uniform(0, 0.03))
        finally:
            connection.close()

    def reader():
        try:
            while (lines := committed.get(timeout=30)) is not None:
                jobs.ensure_fresh_summaries(run.pk)
                if (on_the_board := _lines_on_the_board(run.pk)) < lines:
                    stale.append(f"{on_the_board} lines on the board, {lines} committed before the read")
                read.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=refresh_now_and_then), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    try:
        for lines in range(1, 41):
            refreshed.clear()
            refreshed.wait(30)  # a refresh has taken the last mark
            _record_an_answer(attempt_id, lines)
            read.clear()
            committed.put(lines)
            read.wait(30)  # the reader came between the commit and its mark
            clean_redis.sadd(jobs.OUT_OF_DATE, run.pk)
    finally:
        done.set()
        committed.put(None)
        for thread in threads:
            thread.join(30)
    assert stale == []


@pytest.mark.django_db(transaction=True)
def test_pausing_or_cancelling_a_run_does_not_wait_for_its_refresh(experiment, clean_redis):
    """A refresh of a million attempts takes seconds: the run's row is not what it holds."""
    run = do_start_run(experiment)
    held, release = threading.Event(), threading.Event()
    refresh = threading.Thread(target=_hold_the_run, args=(run.pk, held, release))
    refresh.start()
    try:
        assert held.wait(10)
        threading.Timer(2, release.set).start()  # a long refresh
        started = time.monotonic()
        assert do_pause_run(run)
        assert time.monotonic() - started < 1
    finally:
        release.set()
        refresh.join(10)
    run.refresh_from_db()
    assert run.status == "paused"


@pytest.mark.django_db(transaction=True)
def test_refreshes_of_one_run_take_turns(experiment, clean_redis):
    run = do_start_run(experiment)
    held, release = threading.Event(), threading.Event()
    refresh = threading.Thread(target=_hold_the_run, args=(run.pk, held, release))
    refresh.start()
    assert held.wait(10)
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    assert refresh_run_summaries(run.pk)
    assert time.monotonic() - started >= 0.4  # waited for the one under way
    refresh.join(10)
