"""Execute attempts: call the model, validate the patch, score it, record it.

The attempt row is the unit of work. A worker claims a batch of rows with one conditional
update and gets a token; results are written only where that token still holds, so a slow
worker whose attempts were re-queued after looking abandoned cannot count them twice.

A job's own thread does all the database work (claim in one UPDATE, record in bulk); its
pool threads only call providers and validate patches. That keeps the per-attempt cost of
a latency-bound run in a few bulk statements instead of a handful of queries per attempt,
and keeps worker threads free of database connections.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import itertools
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from typing import Any, TypeVar, cast

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone
from redis.exceptions import RedisError
from structlog.contextvars import bind_contextvars, reset_contextvars

from datasets.environments import (
    environment_of,
    needs_of_recipe_row,
    prepare_environments,
    serves,
    this_process_capabilities,
    with_recipe_needs,
)
from datasets.models import EnvironmentRecipe, GoldStatus, TaskInstance
from datasets.validation import validate_task
from evaluation.environments import EnvironmentUnavailable
from evaluation.repositories import RepositoryUnavailable, ensure_commit
from evaluation.workloads import workload_for
from evaluation.workloads.base import Context, Evaluation, asks_for_confidence, stated_confidence
from evaluation.workloads.pr_patch import PrPatch
from experiments import agent, answer_journal, in_flight, liveness
from experiments.agent import is_agent
from experiments.attempt_queue import enqueue_attempts
from experiments.budgets import run_budgets
from experiments.bulk import insert_rows, update_by_pk
from experiments.claiming import RETURNED, claim_rows, lock_held
from experiments.few_shot import load_pools
from experiments.judging import enqueue_judging
from experiments.misconfigured import (
    CALLED_CONFIGURATION_FAILURES,
    stop_misconfigured_arms,
)
from experiments.mock_books import register_books_for
from experiments.models import ATTEMPT_TERMINAL, Artifact, ArtifactKind, Attempt, AttemptStatus, Run, RunArm, RunStatus
from experiments.notifications import queue_budget_exceeded, queue_run_finished
from experiments.prompts import PromptNotFillable, build_request, seed_key
from experiments.replay import load_recorded_answers
from experiments.response_cache import CacheSlot, count_hits, find_cached, store_answers
from experiments.signals import announce_chunk_recorded, announce_run_changed
from experiments.trajectory import Trajectory, message_record
from prbench import metrics, redaction
from prbench.after_commit import after_commit
from providers import gateway
from providers.budget import Budget
from providers.errors import ErrorCategory, ProviderError
from providers.limits import WAKE_S, wait_for_release
from providers.outcomes import outcome_class
from providers.response_cache import response_cache_key
from providers.types import ArmSpec, Completion, CompletionRequest

logger = logging.getLogger(__name__)

# Finished attempts wait in memory at most this long before they are written: progress
# stays live, and a crash loses nothing that requeue_stale cannot recover (rows stay running).
FLUSH_AFTER_S = 0.2
STEAL_FOR_S = 300
# How long a job leaves an arm whose slots were all taken out of its next claims, so those
# go to other arms (a slot the job itself gives back ends it sooner). Short: a slot another
# worker frees is taken on this job's next round, and a long pause would idle its threads.
BLOCKED_S = 0.05
# An attempt whose provider call has gone on this many times its arm's usual latency (and at
# least STALL_FLOOR_S) is stalled: a hanging provider, a long retry-after. It stops counting
# against the job's threads, so the job claims other arms' attempts in its place, up to the
# pool's spare threads (jobs.py: STALLED_ROOM per thread).
STALL_FACTOR = 4
STALL_FLOOR_S = 0.5
# An arm the job has not heard from yet is held to the fastest arm's pace, and more strictly:
# a hanging provider never answers, so its calls have no latency of their own to be judged by,
# and every second they count as working the other arms lose threads. A call that has not
# answered in twice the time the fastest arm takes is not keeping pace; if it is merely slow,
# the cost of the mistake is a few of the pool's spare threads until its first answer.
UNHEARD_FACTOR = 2
# Arms that answer within FAST_S (a local or mock model, a cached proxy) finish an attempt in
# less time than claiming and recording one costs: while every arm the job has heard from is
# that fast, it keeps FAST_DEPTH attempts per thread in hand (queued on its pool), so each claim,
# record and journal write covers a chunk of tens of attempts instead of two. A slow arm heard
# from ends it (each attempt waiting in the pool holds its arm's slot, so an arm's slots still
# bound what one job holds of it).
FAST_S = 0.005
FAST_DEPTH = 8
# A job reuses an arm made ready to call (its org's allowlist and credential read, its adapter
# built) for this long: a change to them reaches a running job within it, and a new job at once.
PREPARED_FOR_S = 1.0
# How long a job trusts its last look at whether the run's dataset has environment recipes.
RECIPES_FOR_S = 1.0
# A job takes the run's queued attempts from the next STEAL_WINDOW times as many as it needs.
STEAL_WINDOW = 4
# A job that found its run drained looks again this often while calls of its own still run:
# attempts come back to the queue, and another worker's claim may have beaten its own.
LOOK_AGAIN_S = 0.5
# Set when the worker process is asked to stop: jobs claim nothing more (see worker.py).
stop_claiming = threading.Event()


@dataclass
class Outcome:
    """What happened to one claimed attempt, ready to be recorded."""

    attempt_id: int
    request: CompletionRequest | None
    completion: Completion | None = None
    error: ProviderError | None = None
    evaluation: Evaluation | None = None  # what the task's kind made of the answer
    responded_at: datetime | None = None
    cache: CacheSlot | None = None
    # The platform (Redis, the database) failed before the provider was called: nothing to
    # score and nothing paid, so the attempt goes back to the queue instead of failing.
    give_back: bool = False
    # An agent's steps (experiments/agent.py); None for a single-turn answer.
    trajectory: Trajectory | None = None
    # What an agent's turns cost before one failed for good: recorded with the failure.
    spent: Completion | None = None
    # Calls sent again because an earlier claim's call was lost with its worker (mid-call).
    repeat_calls: int = 0


def claim_attempts(
    attempt_ids: list[int], related: RelatedCache | None = None, token: uuid.UUID | None = None
) -> tuple[uuid.UUID, list[Attempt]]:
    """Claim whichever of these attempts are still queued in a running run, in one UPDATE.
    Returns the claim token and the claimed attempts with their run, arm and task loaded.

    A caller that passes its own ``token`` knows it before the claim commits, so it can give
    the attempts back even if reading them afterwards fails."""
    token = token or uuid.uuid4()
    claimer = liveness.claimer_name()  # before the claim: the sweep must see the claimer alive
    rows = claim_rows(attempt_ids, token, claimer, settings.PRBENCH_MAX_ATTEMPT_CLAIMS)
    if not rows:
        return token, []
    running = sorted((row for row in rows if row.status == AttemptStatus.RUNNING), key=lambda row: row.sequence)
    attempts = [Attempt.from_db(connection.alias, CLAIMED_FIELDS, [row[i] for i in _IN_FIELD_ORDER]) for row in running]
    if len(rows) > len(attempts):  # the claim retired poison attempts: they finished here
        _count_retired(token, attempt_ids)
    (related or RelatedCache()).attach(attempts)
    return token, attempts


# The attempt's columns a claim reads back, in the model's field order (Model.from_db's).
CLAIMED_FIELDS = [field.attname for field in Attempt._meta.concrete_fields if field.attname in RETURNED]
_IN_FIELD_ORDER = [RETURNED.index(name) for name in CLAIMED_FIELDS]


def _count_retired(token: uuid.UUID, attempt_ids: list[int]) -> None:
    """Attempts the claim retired: counted as finished, with the calls their earlier claims made
    again recorded as ``repeat_calls`` (each claim's worker died mid-call: the provider was paid
    for answers nobody got), and their journal entries done with."""
    retired = Attempt.objects.filter(pk__in=attempt_ids, claim_token=token, status=AttemptStatus.FAILED)
    rows = list(retired.values_list("pk", "outcome", "error_category", "arm__provider"))
    repeats = answer_journal.calls_beyond_one_per_turn([pk for pk, *_ in rows])
    update_by_pk(Attempt, {pk: {"repeat_calls": count} for pk, count in repeats.items() if count})
    counted = [(AttemptStatus.FAILED, outcome, category, provider) for _, outcome, category, provider in rows]
    transaction.on_commit(functools.partial(metrics.count_attempts_finished, counted), robust=True)
    after_commit(answer_journal.forget, [pk for pk, *_ in rows])
    announce_chunk_recorded([pk for pk, *_ in rows])  # ended here, not by a record: folded here


class RelatedCache:
    """A job's runs, arms and tasks, each read once rather than with every attempt: a
    run's snapshot and a task's files can be large, and many attempts share them."""

    MAX_TASKS = 512  # bounds memory when one job works through a large run

    def __init__(self) -> None:
        self.runs: dict[int, Run] = {}
        self.arms: dict[int, RunArm] = {}
        self.tasks: dict[int, TaskInstance] = {}

    def attach(self, attempts: list[Attempt]) -> None:
        self.load_runs({a.run_id for a in attempts})
        self.load_arms({a.arm_id for a in attempts})
        if len(self.tasks) > self.MAX_TASKS:
            self.tasks.clear()
        loaded = self._load(self.tasks, TaskInstance.objects.select_related("dataset"), {a.task_id for a in attempts})
        validated = {a.task_id for a in attempts if not self.runs[a.run_id].inference_only}
        # Here, not on a pool thread: finding (or building) an environment reads the database.
        # An inference-only run validates nothing, so it builds nothing.
        prepare_environments([task for task in loaded if task.pk in validated])
        for attempt in attempts:
            attempt.run = self.runs[attempt.run_id]
            attempt.arm = self.arms[attempt.arm_id]
            attempt.task = self.tasks[attempt.task_id]
        arms = {attempt.arm_id: attempt.arm for attempt in attempts}.values()
        load_recorded_answers(arms, {run_id: run.org_id for run_id, run in self.runs.items()})
        load_pools({attempt.run_id: attempt.run for attempt in attempts}.values())
        register_books_for(attempts)

    def load_runs(self, ids: set[int]) -> None:
        # The experiment's budget comes along: one query per job, not one per claimed chunk.
        self._load(self.runs, Run.objects.annotate(experiment_budget_usd=F("experiment__budget_usd")), ids)

    def load_arms(self, ids: set[int]) -> None:
        self._load(self.arms, RunArm.objects.all(), ids)

    @staticmethod
    def _load(cache: dict, rows: QuerySet, ids: set[int]) -> list:
        """Read the rows not yet cached; returns those it read."""
        missing = ids - cache.keys()
        if not missing:
            return []
        read = rows.in_bulk(missing)
        cache.update(read)
        return list(read.values())


def claim_attempt(attempt_id: int) -> uuid.UUID | None:
    token, claimed = claim_attempts([attempt_id])
    return token if claimed else None


def arm_spec(attempt: Attempt) -> ArmSpec:
    return run_arm_spec(attempt.arm)


def run_arm_spec(arm: RunArm) -> ArmSpec:
    return ArmSpec(arm.provider, arm.model_name, arm.config, key=f"run-arm:{arm.pk}", credential=arm.credential_name)


def execute_logged(attempt: Attempt, *args: Any) -> Outcome:
    """``execute``, with the attempt's public ids on every line logged while it runs. Bound
    and reset by hand: structlog's ``bound_contextvars`` context manager cost more than twice
    as much, per attempt (issue 31)."""
    tokens = bind_contextvars(run=str(attempt.run.code), attempt=str(attempt.code))
    try:
        return execute(attempt, *args)
    finally:
        reset_contextvars(**tokens)


def execute(
    attempt: Attempt,
    prepared: gateway.PreparedArm,
    held_slot: str | None = None,
    built: CompletionRequest | None = None,
    cache: CacheSlot | None = None,
) -> Outcome:
    """Call the model (or reuse the cached answer ``cache`` holds) and have the task's kind
    evaluate its answer (a patch is validated). ``built`` is the request when the job already
    built it (to look it up in the cache). No database access: runs on pool threads."""
    request = None
    # A first claim's call was counted by its job before this thread got it (first_calls); an
    # agent counts each of its turns itself, and a reused answer makes none.
    repeat = _RepeatCount(counted_unsent=attempt.claims == 1 and not (cache and cache.hit))
    try:
        if attempt.task.repo and not attempt.run.inference_only:
            # Before the call: a repository that cannot be checked out must not cost an answer.
            task = attempt.task
            ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
            environment_of(task)  # its environment (prepared when the job loaded the task)
        if is_agent(attempt.arm.config):
            repeat.counted_unsent = False
            return _execute_agent(attempt, prepared, held_slot)
        request = built or build_request(attempt)
        try:
            completion, responded_at = _answer(attempt, prepared, request, held_slot, cache, repeat)
        except ProviderError as error:
            return Outcome(attempt.pk, request, error=error, repeat_calls=repeat.calls)
        if held_slot and not attempt.run.inference_only:  # the call is over: validating must not keep the arm's slot
            gateway.release_slots(prepared, [held_slot])
        evaluation = evaluate_answer(attempt, completion.text)
        return Outcome(
            attempt.pk, request, completion, None, evaluation, responded_at, cache, repeat_calls=repeat.calls
        )
    except INFRASTRUCTURE_ERRORS as exc:
        # Only before the provider answered: after it, releasing a slot is the one Redis
        # call left, and that never raises (a slot not given back expires with its lease).
        logger.warning("attempt %s: given back to the queue: %s: %s", attempt.pk, type(exc).__name__, exc)
        if repeat.counted_unsent:
            # Or its next claim would count a call this one never made as paid for again.
            # Best effort: with Redis down too, the count stays one over, never under.
            answer_journal.unmark_sent(attempt.pk)
        return Outcome(attempt.pk, request, give_back=True)
    except PromptNotFillable as exc:
        # Before any call: never paid, and not the model's failure.
        return Outcome(attempt.pk, None, error=ProviderError(ErrorCategory.PLATFORM_ERROR, str(exc)))
    except RepositoryUnavailable as exc:
        # The platform's failure, not the model's: named, so whoever runs it can fix it.
        logger.warning("attempt %s: %s", attempt.pk, exc)
        return Outcome(
            attempt.pk, request, error=ProviderError(ErrorCategory.UNKNOWN, f"repository unavailable: {exc}")
        )
    except EnvironmentUnavailable as exc:
        # Checked before the call, so normally never paid for; the run's page names the
        # environment (its key, repository and version) and why.
        logger.warning("attempt %s: %s", attempt.pk, exc)
        return Outcome(attempt.pk, request, error=ProviderError(ErrorCategory.PLATFORM_ERROR, str(exc)[:2000]))
    except Exception as exc:
        # Whatever broke (a bad config the checks missed, a sandbox error), the attempt ends
        # as a scored failure instead of jamming its batch and the run for ever.
        logger.exception("attempt %s crashed", attempt.pk)
        return Outcome(attempt.pk, request, error=_platform_error(exc))


@dataclass
class _RepeatCount:
    calls: int = 0
    # This claim's call is counted in the journal (answer_journal.mark_sent) and not sent yet.
    counted_unsent: bool = False


def _answer(
    attempt: Attempt,
    prepared: gateway.PreparedArm,
    request: CompletionRequest,
    held_slot: str | None,
    cache: CacheSlot | None,
    repeat: _RepeatCount,
) -> tuple[Completion, datetime]:
    """The attempt's answer and when it came: reused from the response cache, recovered from
    the journal (an earlier claim's worker got it and died before recording it), or asked
    of the provider. The job's thread journals it (``journal_answers``) as soon as it takes
    it, so that it is never paid for twice.

    A call is counted before it is sent: a first claim's by its job, with its chunk's
    (``answer_journal.mark_sent_many``); a later claim's here, and one an earlier claim already
    sent, whose answer never reached the journal (its worker died mid-call), goes into ``repeat``."""
    if cache and cache.hit:
        return cache.hit.completion, timezone.now()
    if attempt.claims > 1:
        if kept := answer_journal.kept(attempt.pk):
            repeat.calls = kept.repeat_calls  # a claim that called again, then died with its count
            return kept.completion, kept.responded_at
        repeat.calls = answer_journal.mark_sent(attempt.pk)
        repeat.counted_unsent = True
    with in_flight.provider_call(attempt.pk):
        try:
            completion = gateway.call(prepared, request, held_slot)
        except INFRASTRUCTURE_ERRORS:
            # Redis failed before a try was answered: almost always before the first try went
            # out (its rate budget or slot). Rarely, on a retry after a try that failed: a
            # refused try is not billed, but a timed-out one may be, and taking back its count
            # then under-counts by that one try (said in issue 31's note).
            raise
        except BaseException:
            repeat.counted_unsent = False
            raise
    repeat.counted_unsent = False
    return completion, timezone.now()


def journal_answers(outcomes: list[Outcome]) -> None:
    """Keep the provider's answers among these outcomes in the journal, in one round trip, until
    their record commits. Not a reused answer (it was paid for by the attempt that stored it),
    nor an agent's (each of its turns was kept as it came: experiments/agent.py)."""
    answers = [
        (outcome.attempt_id, outcome.completion, outcome.responded_at)
        for outcome in outcomes
        if outcome.completion is not None
        and outcome.responded_at is not None
        and outcome.trajectory is None
        and not _is_hit_outcome(outcome)
    ]
    answer_journal.keep_many(answers)


def first_calls(attempts: list[Attempt], arms: Mapping[int, gateway.PreparedArm | ProviderError]) -> list[int]:
    """Of a claimed chunk, the attempts about to make their first call: a first claim, of an
    arm that may be called, answering in one turn (an agent counts each of its turns itself)."""
    return [
        attempt.pk
        for attempt in attempts
        if attempt.claims == 1
        and isinstance(arms[attempt.arm_id], gateway.PreparedArm)
        and not is_agent(attempt.arm.config)
    ]


def _execute_agent(attempt: Attempt, prepared: gateway.PreparedArm, held_slot: str | None) -> Outcome:
    """An agent arm's attempt: the loop's diff, evaluated like a single-turn patch. A turn
    that failed for good fails the attempt with that turn's error (never the model's
    failure), keeping what the turns before it cost and did."""
    if attempt.task.dataset.kind != PR_PATCH:
        # The arm's settings, not the model: never scored against it.
        why = f"the agent solver writes patches, and a {attempt.task.dataset.kind} task asks for none"
        return Outcome(attempt.pk, None, error=ProviderError(ErrorCategory.PLATFORM_ERROR, why))
    answer = agent.solve(attempt, prepared, held_slot, seed_key(attempt))
    request, repeat_calls = answer.request, answer.repeat_calls
    if answer.error is not None:
        return Outcome(
            attempt.pk,
            request,
            error=answer.error,
            trajectory=answer.trajectory,
            spent=answer.completion,
            repeat_calls=repeat_calls,
        )
    responded_at = timezone.now()
    evaluation = evaluate_answer(attempt, answer.completion.text)
    return Outcome(
        attempt.pk,
        request,
        answer.completion,
        None,
        evaluation,
        responded_at,
        trajectory=answer.trajectory,
        repeat_calls=repeat_calls,
    )


def evaluate_answer(attempt: Attempt, output: str) -> Evaluation:
    """The task's kind's verdict on an answer, with what it may need from the pipeline."""
    run = attempt.run
    context = Context(
        inference_only=run.inference_only,
        grading=run.config_snapshot.get("grading", {}),
        # Looked up when called, not bound here: tests watch validations by replacing it.
        validate=lambda task, patch: validate_task(task, patch),
        gold_times_out=gold_times_out,
    )
    evaluation = workload_for(attempt.task.dataset.kind).evaluate(attempt.task, output, context)
    if asks_for_confidence(run.config_snapshot.get("prompt_template", "")):
        evaluation = replace(evaluation, columns={**evaluation.columns, "confidence": stated_confidence(output)})
    return evaluation


PR_PATCH = PrPatch.kind

# What an attempt's own platform can fail with: the attempt is not at fault, and is tried again.
INFRASTRUCTURE_ERRORS = (RedisError, DatabaseError)


def _platform_error(exc: Exception) -> ProviderError:
    return ProviderError(ErrorCategory.PLATFORM_ERROR, f"the platform failed on this attempt: {type(exc).__name__}")


# validate_gold's findings in which every gold run's tests finished inside the limit.
GOLD_FINISHED = (GoldStatus.RESOLVED, GoldStatus.UNRESOLVED, GoldStatus.FLAKY, GoldStatus.TRIVIAL)


def gold_times_out(task: TaskInstance) -> bool:
    """Whether the task's gold patch runs out of the validation time too, which alone makes a
    patch's timeout the harness's failure. ``validate_gold``'s finding says it finished when
    it has one; otherwise (never checked, or it could not be) the gold is validated now, in
    the same sandbox and limit as the patch (a sandbox that cannot start fails the attempt as
    the platform's). A task with no gold patch has nothing to compare with: the timeout is
    the patch's, as SWE-bench's harness counts it."""
    if not task.gold_patch.strip() or task.gold_status in GOLD_FINISHED:
        return False
    return validate_task(task, task.gold_patch).timed_out


def _execute_group(group: list[Work], done: queue.SimpleQueue[tuple[Submitted, Future]]) -> None:
    """On a pool thread: each attempt of the group executed in turn, handed back as it ends."""
    for work in group:
        future: Future[Outcome] = Future()
        try:
            future.set_result(
                execute_logged(work.attempt, work.submitted.arm, work.submitted.slot, work.request, work.cache)
            )
        except BaseException as exc:  # handed to the job's thread, as a pool's future would
            future.set_exception(exc)
        done.put((work.submitted, future))


@dataclass(frozen=True)
class Submitted:
    """What a job keeps about an attempt it handed to a thread."""

    token: uuid.UUID
    arm_id: int
    arm: gateway.PreparedArm
    slot: str | None
    attempt_id: int = 0


@dataclass(frozen=True)
class Work:
    """An attempt handed to a pool thread, with what the job's thread prepared for it."""

    submitted: Submitted
    attempt: Attempt
    request: CompletionRequest | None = None
    cache: CacheSlot | None = None


class BatchRunner:
    """Runs a job's attempts through a pool of ``threads``, claiming a chunk whenever
    enough threads are free and recording finished attempts in bulk.

    Claiming just before submitting (not the whole job up front) keeps ``started_at``
    honest: an attempt's latency is measured from when a thread was ready for it.

    When its own attempts are done, a job goes on with its run's other queued attempts
    (those of jobs still waiting in the queue, which then find nothing to claim). Without
    that, every job boundary idles the threads that finish first, and jobs divide unevenly
    between workers; with it, a run flows through the workers without gaps. It takes no
    one's turn: the run's queued jobs were ahead of any later run's in the queue anyway.
    """

    def __init__(self, run_id: int, attempt_ids: Iterable[int], threads: int, capacity: int | None = None):
        self.run_id = run_id
        # The job's own attempts not yet claimed, each with its arm once read (in run()).
        self.pending: dict[int, int] = {}
        self.attempt_ids = list(attempt_ids)
        # Arms whose slots were all taken at the last try, and when to try them again; a slot
        # this job gives back opens its arm at once.
        self.blocked: dict[int, float] = {}
        self.threads = threads
        # The pool's threads: more than ``threads``, for attempts stalled on their provider.
        self.capacity = max(threads, capacity or threads)
        self.in_flight: dict[int, int] = {}  # attempt id -> arm id, of those on the pool now
        self.usual_s: dict[int, float] = {}  # arm id -> its calls' usual latency in this job
        self.look_again_at = 0.0
        self.gave_up = False  # the platform failed an attempt: take no more of the run
        # Claim when a quarter of the threads are free (or none is busy), not on every
        # single completion: a claim is one UPDATE for the whole chunk.
        self.refill_at = max(1, threads // 4)
        # Attempts in hand per thread: FAST_DEPTH while every arm heard from answers in
        # FAST_S, else one (see _note_latency).
        self.depth = 1
        self.arms_handed_out: set[int] = set()
        self.running = 0
        # Threads hand finished work back through a queue: waiting on it is O(1), where
        # concurrent.futures.wait re-arms every pending future on each wake-up.
        self.done: queue.SimpleQueue[tuple[Submitted, Future]] = queue.SimpleQueue()
        self.finished: dict[uuid.UUID, list[Outcome]] = {}
        self.oldest_finished = 0.0
        self.run_drained = False
        # A job stops taking its run's other attempts after a while: RQ sees no heartbeat
        # from a SimpleWorker mid-job, and later runs' jobs should get their turn.
        self.steal_until = time.monotonic() + STEAL_FOR_S
        self.related = RelatedCache()
        # Each arm made ready to call (governance read, adapter built) and when: reused by the
        # job's claims for PREPARED_FOR_S.
        self.prepared: dict[int, tuple[float, gateway.PreparedArm | ProviderError]] = {}
        self.claimed: dict[uuid.UUID, list[int]] = {}
        self.recorded = 0
        # What this worker has, and whether the last look at attempts found one it cannot run.
        self.capabilities: tuple[str, ...] | None = None  # looked up when a task needs something
        self.has_recipes, self.recipes_checked_at = True, -RECIPES_FOR_S
        self.unservable_seen = False

    def run(self, pool: Executor) -> int:
        """Returns how many attempts this job recorded."""
        try:
            # Only those still queued: an earlier job of the run may have taken the rest
            # (see _steal), and waiting for a slot to claim them would only idle this one.
            self.pending = self._servable(
                Attempt.objects.filter(pk__in=self.attempt_ids, status=AttemptStatus.QUEUED), hand_back=True
            )
            while self._has_work():
                free = self._free_threads()
                if free and (free >= self._refill_at() or not self.running) and self._claim_and_submit(pool, free):
                    continue
                if self._flush_due():
                    self._flush()
                    continue
                if self.running:
                    self._collect()
                elif self.pending:
                    self._wait_for_a_slot()
            self._flush()
        except BaseException:
            self._abandon()
            raise
        return self.recorded

    def _free_threads(self) -> int:
        """Threads for new attempts: the job's ``threads`` less its working attempts. Those
        stalled on their provider are not working (in_flight.py): a hanging or rate-limited
        arm must not take the threads of the arms beside it. Its own slots still bound it."""
        free = self.threads * self.depth - self.running
        if free >= self._refill_at() or not self.running:
            return free  # the common case, with no look at the calls
        now = time.monotonic()
        stalled = sum(1 for pk, arm_id in self.in_flight.items() if self._stalled(pk, arm_id, now))
        return max(0, min(free + stalled, self.capacity - self.running))

    def _stalled(self, attempt_id: int, arm_id: int, now: float) -> bool:
        since = in_flight.waiting_since(attempt_id)
        if since is None:
            return False
        usual, factor = self.usual_s.get(arm_id), STALL_FACTOR
        if usual is None:  # not heard from: held to the fastest arm's pace (UNHEARD_FACTOR)
            usual, factor = min(self.usual_s.values(), default=0.0), UNHEARD_FACTOR
        return now - since > max(STALL_FLOOR_S, factor * usual)

    def _note_latency(self, arm_id: int, outcome: Outcome) -> None:
        completion = outcome.completion
        # A reused or replayed answer took no time of its own; zero is a time (a local model).
        if completion is None or completion.latency_ms is None or completion.replayed or _is_hit_outcome(outcome):
            return
        seconds = completion.latency_ms / 1000
        before = self.usual_s.get(arm_id)
        self.usual_s[arm_id] = seconds if before is None else 0.8 * before + 0.2 * seconds
        self._set_depth()

    def _set_depth(self) -> None:
        """FAST_DEPTH while every arm the job has handed out is heard from and fast: an arm
        not heard from yet (or only failing) may be slow, or failing fast for its settings,
        where a few calls are all it should get."""
        heard = all(arm_id in self.usual_s for arm_id in self.arms_handed_out)
        self.depth = FAST_DEPTH if heard and max(self.usual_s.values(), default=1.0) < FAST_S else 1

    def _refill_at(self) -> int:
        return self.refill_at * self.depth

    def _capabilities(self) -> tuple[str, ...]:
        # Only for a job whose tasks need something: finding the worker's interpreters the
        # first time runs each of them, which a job of self-contained tasks need not wait for.
        if self.capabilities is None:
            self.capabilities = this_process_capabilities()
        return self.capabilities

    def _run_has_recipes(self) -> bool:
        """Whether any task the run's dataset holds has an environment recipe, looked up again
        every RECIPES_FOR_S: a recipe added while the job runs reaches it within that."""
        now = time.monotonic()
        if now >= self.recipes_checked_at + RECIPES_FOR_S:
            self.has_recipes = EnvironmentRecipe.objects.filter(dataset__experiments__runs=self.run_id).exists()
            self.recipes_checked_at = now
        return self.has_recipes

    def _servable(
        self, attempts: QuerySet[Attempt], limit: int | None = None, hand_back: bool = False
    ) -> dict[int, int]:
        """Of ``attempts`` (id -> arm id, in sequence order), those whose task needs nothing
        this worker lacks. With ``hand_back``, the others go back to their own queue (their
        job came from a queue this worker should no longer serve, or from before their
        task's recipe changed): unclaimed, so this is no claim and no retry of theirs."""
        ordered = attempts.order_by("sequence")
        if not self._run_has_recipes():
            # No task of the run can need anything: every one is servable, read as it comes,
            # with no recipe looked up and no needs weighed for each row (a job stealing from
            # a large run reads hundreds each time, issue 31).
            self.unservable_seen = False
            pairs = ordered.values_list("pk", "arm_id")
            return dict(pairs[:limit] if limit is not None else pairs)
        rows = with_recipe_needs(ordered, task="task__")
        found = rows.values_list("pk", "arm_id", "recipe_python", "recipe_system_packages")
        servable: dict[int, int] = {}
        elsewhere: list[int] = []
        for pk, arm_id, python, packages in found[:limit] if limit is not None else found:
            needs = needs_of_recipe_row(python, packages)
            if not needs or serves(self._capabilities(), needs):
                servable[pk] = arm_id
            else:
                elsewhere.append(pk)
        if hand_back and elsewhere:
            logger.info("handing back %d attempt(s) this worker cannot run", len(elsewhere))
            enqueue_attempts(self.run_id, elsewhere)
        self.unservable_seen = bool(elsewhere)
        return servable

    def _abandon(self) -> None:
        """The job is failing (the database or Redis went away, say). Let the calls already
        made finish and give back their slots, keep what can be kept, and return the
        attempts still claimed to the queue rather than leave them to requeue_stale."""
        with contextlib.suppress(Exception):
            while self.running:
                self._collect()
        with contextlib.suppress(Exception):
            self._flush()
        try:
            for token, ids in self.claimed.items():
                _despite_database_outage(functools.partial(_give_back_claim, ids, token))
        except Exception:
            # They stay claimed by this live process, which no sweep would take them from: it
            # gives up its identity instead, so its lease lapses and the sweep takes them back.
            logger.exception("could not give back this job's attempts; retiring this worker's lease")
            liveness.stop()

    def _collect(self) -> None:
        """Wait for at least one attempt to finish, take all that have, journal their answers
        and give back the slots they were started in: one Redis round trip for the answers and
        one per arm for the slots."""
        try:
            submitted, future = self.done.get(timeout=FLUSH_AFTER_S)
        except queue.Empty:
            return
        slots: dict[str, tuple[gateway.PreparedArm, list[str]]] = {}
        collected: list[tuple[uuid.UUID, Outcome]] = []
        while True:
            self.running -= 1
            self.in_flight.pop(submitted.attempt_id, None)
            outcome = future.result()
            self._note_latency(submitted.arm_id, outcome)
            collected.append((submitted.token, outcome))
            self.blocked.pop(submitted.arm_id, None)  # its slot is free again, for us or a retry
            if submitted.slot:
                slots.setdefault(submitted.arm.arm.key, (submitted.arm, []))[1].append(submitted.slot)
            try:
                submitted, future = self.done.get_nowait()
            except queue.Empty:
                break
        journal_answers([outcome for _, outcome in collected])
        for token, outcome in collected:
            self._finished(token, outcome)
        for arm, held in slots.values():
            gateway.release_slots(arm, held)

    def _has_work(self) -> bool:
        return bool(self.pending or self.running or not self.run_drained)

    def _candidates(self, count: int) -> list[tuple[int, int]]:
        """Up to ``count`` queued attempts (id, arm id) of arms not known to be full: the
        job's own first, then its run's other queued ones."""
        if stop_claiming.is_set():
            self.pending.clear()
            self.run_drained = True
            return []
        now = time.monotonic()
        self.blocked = {arm_id: until for arm_id, until in self.blocked.items() if until > now}
        picked = list(
            itertools.islice(((pk, arm) for pk, arm in self.pending.items() if arm not in self.blocked), count)
        )
        if len(picked) < count:
            picked += self._steal(count - len(picked), {pk for pk, _ in picked})
        return picked

    def _steal(self, count: int, picked: set[int]) -> list[tuple[int, int]]:
        now = time.monotonic()
        if self.gave_up or now > self.steal_until:
            self.run_drained = True
            return []
        if self.run_drained:
            # The job stays open while calls of its own run (a hanging arm's, say) or attempts
            # of its own wait for a full arm's slot: it keeps its threads busy with whatever
            # comes back to the run's queue, or another worker left there, now and then.
            if not (self.running or self.pending) or now < self.look_again_at:
                return []
            self.run_drained = False
        queued = Attempt.objects.filter(run_id=self.run_id, status=AttemptStatus.QUEUED)
        window = STEAL_WINDOW * (count + len(picked))
        rows = list(self._servable(queued.exclude(arm_id__in=list(self.blocked)), limit=window).items())
        # Nothing left but attempts of full arms: their own jobs (this one, or those still in
        # the queue) run them when slots free up. Nor when the next ones need what this worker
        # lacks: their own jobs wait on their own queue for a worker that has it.
        self.run_drained = not rows or self.unservable_seen
        self.look_again_at = now + LOOK_AGAIN_S
        # A random share of the run's next queued ones, in their order: every worker stealing
        # from the run reads the same next ones, and taking the first of them each time made
        # their claims collide.
        free = [(pk, arm) for pk, arm in rows if pk not in picked]
        if len(free) <= count:
            return free
        return [free[index] for index in sorted(random.sample(range(len(free)), count))]

    def _claim_and_submit(self, pool: Executor, free: int) -> bool:
        """Take slots for up to ``free`` attempts, claim those that got one and start them;
        returns whether it got anywhere: claimed some, or found its candidates taken (if not,
        the job waits for running ones or a slot).

        The slot comes before the claim: an attempt whose arm is at its concurrency limit
        stays queued, instead of taking a thread only to wait on it, so a hanging arm holds
        its own slots and never the threads other arms' attempts need."""
        candidates = self._candidates(free)
        if not candidates:
            return False
        arms = self._prepare_arms({arm_id for _, arm_id in candidates})
        slots: dict[int, list[str]] = {}
        try:
            ids = self._take_slots(candidates, arms, slots)
            if not ids:
                # Every candidate's arm was full: those arms are blocked now, so the next look
                # passes over them to other arms' attempts at once. Returning "nowhere" here
                # made the job wait for a running attempt to finish first, which then found
                # the block expired and the same full arms' attempts first in line again.
                return any(arm_id in self.blocked for _, arm_id in candidates)
            return self._claim_with_slots(pool, ids, arms, slots)
        finally:
            for arm_id, unused in slots.items():  # those of attempts not claimed after all
                gateway.release_slots(cast(gateway.PreparedArm, arms[arm_id]), unused)

    def _prepare_arms(self, arm_ids: set[int]) -> dict[int, gateway.PreparedArm | ProviderError]:
        self.related.load_runs({self.run_id})
        self.related.load_arms(arm_ids)
        run = self.related.runs[self.run_id]
        budgets = run_budgets(run)
        now = time.monotonic()
        for arm_id in arm_ids:
            if now - self.prepared.get(arm_id, (-PREPARED_FOR_S, None))[0] >= PREPARED_FOR_S:
                self.prepared[arm_id] = (now, _prepare(run, self.related.arms[arm_id]))
        return {arm_id: _with_budgets(self.prepared[arm_id][1], budgets) for arm_id in arm_ids}

    def _take_slots(
        self,
        candidates: list[tuple[int, int]],
        arms: dict[int, gateway.PreparedArm | ProviderError],
        slots: dict[int, list[str]],
    ) -> list[int]:
        """One slot per candidate where its arm has one free (into ``slots``, by arm); the
        ids to claim. Attempts of an arm that may not be called need none: they fail at once."""
        by_arm: dict[int, list[int]] = {}
        for pk, arm_id in candidates:
            by_arm.setdefault(arm_id, []).append(pk)
        ids: list[int] = []
        for arm_id, pks in by_arm.items():
            arm = arms[arm_id]
            if isinstance(arm, ProviderError):
                ids += pks
                continue
            slots[arm_id] = held = gateway.hold_slots(arm, len(pks))
            if len(held) < len(pks):
                self.blocked[arm_id] = time.monotonic() + BLOCKED_S
            ids += pks[: len(held)]
        for pk in ids:
            self.pending.pop(pk, None)
        return ids

    def _claim_with_slots(
        self,
        pool: Executor,
        ids: list[int],
        arms: dict[int, gateway.PreparedArm | ProviderError],
        slots: dict[int, list[str]],
    ) -> bool:
        token = uuid.uuid4()
        self.claimed[token] = ids  # before the claim commits: if reading it back fails, _abandon gives them back
        token, attempts = claim_attempts(ids, self.related, token)
        self.claimed[token] = [attempt.pk for attempt in attempts]
        if not attempts:
            # Another worker got there first: the run's next queued ones are looked at again at
            # once (two workers stealing from one run meet now and then; waiting LOOK_AGAIN_S
            # each time idled them). Paused or cancelled: later (_steal), if the job stays open.
            raced = Run.objects.filter(pk=self.run_id, status=RunStatus.RUNNING).exists()
            self.run_drained = not raced
            self.look_again_at = time.monotonic() + (0 if raced else LOOK_AGAIN_S)
            # They are off ``pending`` now: try the next at once rather than wait for a slot.
            return True
        looked_up = self._look_up_cached(pool, attempts, arms)
        calling = [attempt for attempt in attempts if not _is_hit(looked_up.get(attempt.pk))]
        answer_journal.mark_sent_many(first_calls(calling, arms))
        work: list[Work] = []
        for attempt in attempts:
            arm = arms[attempt.arm_id]
            if isinstance(arm, ProviderError):  # not allowed, or no credential: no call at all
                self._finished(token, Outcome(attempt.pk, None, error=arm))
                continue
            request, cache = looked_up.get(attempt.pk, (None, None))
            held = slots[attempt.arm_id]
            # A reused answer needs no slot; one left over is given back by the caller.
            slot = held.pop() if held and not _is_hit((request, cache)) else None
            work.append(Work(Submitted(token, attempt.arm_id, arm, slot, attempt.pk), attempt, request, cache))
        # Cut before submitting: handing out a new arm's first attempt changes the depth.
        size = self.depth
        for group in [work[start : start + size] for start in range(0, len(work), size)]:
            self._submit(pool, group)
        return True

    def _wait_for_a_slot(self) -> None:
        """Nothing is running and every attempt left waits for a full arm: block until one of
        those arms frees a slot (at most ``WAKE_S``: a dead holder's lease runs out unannounced)."""
        self.related.load_arms(set(self.pending.values()))
        wait_for_release([run_arm_spec(self.related.arms[arm_id]).key for arm_id in set(self.pending.values())], WAKE_S)
        self.blocked.clear()

    def _look_up_cached(
        self, pool: Executor, attempts: list[Attempt], prepared: dict[int, gateway.PreparedArm | ProviderError]
    ) -> dict[int, tuple[CompletionRequest, CacheSlot | None]]:
        """For the attempts of runs with the response cache on: each one's request, and its
        cache slot when the request may be cached, every stored answer found in one query.

        Answers finished but not yet written are written first, so a later attempt can reuse
        them; attempts claimed together are not compared with each other, so two identical
        requests in one batch are both sent (the first answer recorded is the one kept)."""
        caching = [
            attempt
            for attempt in attempts
            if attempt.run.config_snapshot.get("response_cache")
            and isinstance(prepared[attempt.arm_id], gateway.PreparedArm)
            # An agent's answer is its whole loop, not one request's: never one cached answer.
            and not is_agent(attempt.arm.config)
        ]
        if not caching:
            return {}
        if any(self.finished.values()):
            self._flush()
        # On the pool's free threads (a claim never takes more attempts than there are):
        # rendering a repository task's prompt reads files, and the job's thread must not
        # do that one attempt after another.
        requests = list(pool.map(_request_or_none, caching))
        keyed: dict[int, tuple[CompletionRequest, CacheSlot | None]] = {}
        for attempt, request in zip(caching, requests, strict=True):
            if request is None:
                continue  # execute builds it again and records why it failed
            arm = cast(gateway.PreparedArm, prepared[attempt.arm_id]).arm
            key = response_cache_key(attempt.run.org_id, arm, request)
            keyed[attempt.pk] = (request, CacheSlot(attempt.run.org_id, key) if key else None)
        found = find_cached({(slot.org_id, slot.key) for _, slot in keyed.values() if slot})
        return {
            pk: (request, replace(slot, hit=found.get((slot.org_id, slot.key))) if slot else None)
            for pk, (request, slot) in keyed.items()
        }

    def _submit(self, pool: Executor, group: list[Work]) -> None:
        """Start these attempts on one pool thread, one after another: one each at depth 1, and
        FAST_DEPTH of a fast arm's at once, so that a job's tens of attempts in hand keep its
        ``threads`` busy without every pool thread waking to take the GIL in turn."""
        for work in group:
            submitted = work.submitted
            self.running += 1
            self.in_flight[submitted.attempt_id] = submitted.arm_id
            if submitted.arm_id not in self.arms_handed_out:
                self.arms_handed_out.add(submitted.arm_id)
                self._set_depth()
        # In a copy of the job's logging context (its run and org), which the thread adds the
        # attempt to: a pool thread does not inherit the context of the thread that submits.
        pool.submit(contextvars.copy_context().run, _execute_group, group, self.done)

    def _finished(self, token: uuid.UUID, outcome: Outcome) -> None:
        if outcome.give_back:
            # Its platform failed: stop taking the run's queued attempts (this one among
            # them), which would only spend their claims while Redis or Postgres is down.
            self.run_drained = self.gave_up = True
        if not any(self.finished.values()):
            self.oldest_finished = time.monotonic()
        self.finished.setdefault(token, []).append(outcome)

    def _flush_due(self) -> bool:
        count = sum(len(outcomes) for outcomes in self.finished.values())
        if not count:
            return False
        idle = not self.running
        return idle or count >= self._refill_at() or time.monotonic() - self.oldest_finished >= FLUSH_AFTER_S

    def _flush(self) -> None:
        for token, outcomes in self.finished.items():
            if outcomes:
                # Answers already paid for: worth waiting out a database restart for.
                self.recorded += _despite_database_outage(functools.partial(_record_or_fail, token, outcomes))
        self.finished.clear()


def _is_hit_outcome(outcome: Outcome) -> bool:
    return bool(outcome.cache and outcome.cache.hit)


def _is_hit(looked_up: tuple[CompletionRequest | None, CacheSlot | None] | None) -> bool:
    return bool(looked_up and looked_up[1] and looked_up[1].hit)


def _request_or_none(attempt: Attempt) -> CompletionRequest | None:
    try:
        return build_request(attempt)
    except Exception:
        return None


def _prepare(run: Run, arm: RunArm) -> gateway.PreparedArm | ProviderError:
    """The arm ready to call, or why the org may not call it. A failing database or Redis is
    not the arm's fault: it propagates, and the job returns its attempts to the queue."""
    try:
        return gateway.prepare(run.org_id, run_arm_spec(arm))
    except ProviderError as error:
        return error


def _with_budgets(
    prepared: gateway.PreparedArm | ProviderError, budgets: tuple[Budget, ...]
) -> gateway.PreparedArm | ProviderError:
    """Held to the run's budgets, with the spend as recorded now."""
    return replace(prepared, budgets=budgets) if isinstance(prepared, gateway.PreparedArm) and budgets else prepared


T = TypeVar("T")


def _despite_database_outage(write: Callable[[], T]) -> T:
    """``write``, tried again while the database is unreachable (a restart, a failover) for up
    to ``PRBENCH_DATABASE_RETRY_SECONDS``, on a new connection each time. Writes here are
    whole transactions, so a try that failed left nothing behind."""
    deadline = time.monotonic() + settings.PRBENCH_DATABASE_RETRY_SECONDS
    pause = 0.5
    while True:
        try:
            return write()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() + pause > deadline:
                raise
            logger.warning("the database is unavailable (%s); trying again in %.1f s", type(exc).__name__, pause)
            if not connection.in_atomic_block:
                connection.close()
            time.sleep(pause)
            pause = min(2 * pause, 5.0)


def _record_or_fail(token: uuid.UUID, outcomes: list[Outcome]) -> int:
    """Record a batch; if the database refuses it, record its outcomes one by one, and an
    outcome it still refuses as the platform's failure, so one bad row sinks nothing else
    and cannot come back on every retry (each retry would pay the provider again).

    A database that is unreachable or busy (OperationalError, InterfaceError) is not a
    refusal of these rows: that propagates, and the job returns its attempts to the queue."""
    try:
        return record_outcomes(token, outcomes)
    except ROW_REFUSED as exc:
        _reraise_unless_refusal(exc)
        logger.exception("a batch of %s outcomes could not be recorded; recording them one by one", len(outcomes))
    recorded = 0
    for outcome in outcomes:
        try:
            recorded += record_outcomes(token, [outcome])
        except ROW_REFUSED as exc:
            _reraise_unless_refusal(exc)
            logger.warning("attempt %s: the database refused its result (%s)", outcome.attempt_id, type(exc).__name__)
            why = f"the database refused this attempt's result: {_why(exc)}"
            refused = ProviderError(ErrorCategory.PLATFORM_ERROR, why)
            recorded += record_outcomes(token, [Outcome(outcome.attempt_id, None, error=refused)])
    return recorded


# What a row can be refused with: a constraint (IntegrityError: a negative count in a
# positive column), a value the column cannot hold (DataError: NUL in text, an overflow),
# or a field's own check before anything is sent (ValueError, TypeError, ValidationError).
ROW_REFUSED = (DatabaseError, ValueError, TypeError, ValidationError)


def _reraise_unless_refusal(exc: Exception) -> None:
    if isinstance(exc, (OperationalError, InterfaceError)):
        raise exc


def _why(exc: Exception) -> str:
    """The error's type and first line: Postgres puts the offending values ("Failing row
    contains …") on later lines, and those can be the whole answer."""
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return redaction.redact_text(f"{type(exc).__name__}: {first_line}"[:300])


def request_record(request: CompletionRequest | None) -> dict:
    """The request as the attempt keeps it. A message's tool calls and results, the tools
    and an agent service's task appear only where there are some: a single-turn attempt's
    record reads as it always has."""
    if request is None:
        return {}
    # Field by field rather than asdict(), which deep-copies every message only for them to be
    # rebuilt here: it was 3% of a worker's time (issue 31). The same dict, key for key.
    record = {name: getattr(request, name) for name in _REQUEST_FIELDS}
    record["messages"] = [message_record(message) for message in request.messages]
    record["response_schema"] = copy.deepcopy(request.response_schema)
    # An empty tools tuple stays (as asdict left it: () never equalled the [] once tested for).
    record["tools"] = tuple(asdict(tool) for tool in request.tools)
    if request.agent_task is None:
        record.pop("agent_task")
    else:
        record["agent_task"] = asdict(request.agent_task)
    if request.idempotency_key == "":
        record.pop("idempotency_key")
    return record


# Every field but the replayed answer, which is the attempt's output, not its request.
_REQUEST_FIELDS = tuple(field.name for field in fields(CompletionRequest) if field.name != "recorded_answer")


TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
)


def _completed_row(outcome: Outcome, now: datetime) -> dict:
    completion, evaluation = outcome.completion, outcome.evaluation
    assert completion is not None and evaluation is not None
    hit = outcome.cache.hit if outcome.cache else None
    untimed = hit is not None or completion.replayed
    return {
        "status": AttemptStatus.COMPLETED,
        "outcome": outcome_class(AttemptStatus.COMPLETED, harness_failed=evaluation.harness_failed),
        "request": request_record(outcome.request),
        "raw_response": completion.raw_response,
        "output": completion.text,
        # Whatever a server reports, never longer than the column: a self-hosted server's
        # 300-character model name must not make the attempt unrecordable.
        "model_served": completion.model_served[:200],
        "provider_request_id": completion.request_id[:200],
        "finish_reason": completion.finish_reason[:64],
        # No counts sent (a replay, a stream that ignored include_usage): unknown, not zero.
        **{name: getattr(completion.usage, name) if completion.usage_reported else None for name in TOKEN_FIELDS},
        # A reused or replayed answer took no time of its own: no timings, rather than ones a
        # board could count.
        "latency_ms": None if untimed else completion.latency_ms,
        "first_token_ms": None if untimed else completion.first_token_ms,
        "output_tokens_per_s": None if untimed else completion.output_tokens_per_s,
        "wall_ms": None if untimed else completion.wall_ms,
        "response_cached": hit is not None,
        "cached_from_id": hit.source_attempt_id if hit else None,
        "cost_usd": completion.cost_usd,
        "cost_source": completion.cost_source if completion.cost_usd is not None else "",
        "cost_breakdown": completion.cost_breakdown if completion.cost_usd is not None else {},
        "retries": completion.retries,
        "retry_log": list(completion.retry_log),
        "warnings": list(completion.warnings),
        "responded_at": outcome.responded_at,
        **evaluation.columns,
        "extracted_answer": evaluation.answer,
        "resolved": evaluation.correct,
        "score": evaluation.score,
        "validated_at": now if evaluation.validated else None,
        "scored_at": now,
        "repeat_calls": outcome.repeat_calls,
        **_agent_columns(outcome.trajectory),
    }


def _agent_columns(trajectory: Trajectory | None) -> dict:
    if trajectory is None:
        return {}
    return {"turns": len(trajectory.steps), "tool_calls": trajectory.tool_call_count}


def _spent_columns(spent: Completion | None) -> dict:
    """What an agent's paid turns cost, on an attempt a later turn failed: the money was spent."""
    if spent is None:
        return {}
    return {
        **{name: getattr(spent.usage, name) if spent.usage_reported else None for name in TOKEN_FIELDS},
        "cost_usd": spent.cost_usd,
        "cost_source": spent.cost_source if spent.cost_usd is not None else "",
        "model_served": spent.model_served[:200],
        "warnings": list(spent.warnings),
    }


def _failed_row(outcome: Outcome, now: datetime) -> dict:
    error = outcome.error
    assert error is not None
    return {
        "status": AttemptStatus.FAILED,
        "outcome": outcome_class(AttemptStatus.FAILED, error.category),
        "request": request_record(outcome.request),
        "error_category": error.category,
        "error_message": error.message[:2000],
        "retries": error.retries,
        "retry_log": error.retry_log,
        "wall_ms": error.wall_ms,  # None when no call was made (not allowed, platform failure)
        "scored_at": now,
        "repeat_calls": outcome.repeat_calls,
        **_agent_columns(outcome.trajectory),
        **_spent_columns(outcome.spent),
    }


def _artifacts(outcome: Outcome, now: datetime) -> list[dict]:
    rows = [
        {
            "attempt_id": outcome.attempt_id,
            "kind": row.kind,
            "status": row.status,
            "content": row.content,
            "duration_ms": row.duration_ms,
            "created_at": now,
        }
        for row in (outcome.evaluation.artifacts if outcome.evaluation else ())
    ]
    if outcome.trajectory is not None:
        rows.append(
            {
                "attempt_id": outcome.attempt_id,
                "kind": ArtifactKind.TRAJECTORY,
                "status": "",
                "content": outcome.trajectory.to_json(),
                "duration_ms": None,
                "created_at": now,
            }
        )
    return rows


@transaction.atomic
def record_outcomes(token: uuid.UUID, outcomes: list[Outcome]) -> int:
    """Write the outcomes whose attempts this token still holds; returns how many."""
    held = {row.id: row for row in lock_held([outcome.attempt_id for outcome in outcomes], token)}
    ours = {pk: (row.run_id, row.provider) for pk, row in held.items()}
    arm_of = {pk: row.arm_id for pk, row in held.items()}
    mine = [outcome for outcome in outcomes if outcome.attempt_id in ours]
    now = timezone.now()
    _give_back([outcome.attempt_id for outcome in mine if outcome.give_back])
    completed = [outcome for outcome in mine if outcome.completion is not None]
    failed = [outcome for outcome in mine if outcome.completion is None and not outcome.give_back]
    completed_rows = {o.attempt_id: _completed_row(o, now) for o in completed}
    failed_rows = {o.attempt_id: _failed_row(o, now) for o in failed}
    update_by_pk(Attempt, completed_rows)
    update_by_pk(Attempt, failed_rows)
    # With the failures that may make it: the decision commits with them, or not at all.
    stop_misconfigured_arms(
        {arm_of[o.attempt_id] for o in failed if o.error and o.error.category in CALLED_CONFIGURATION_FAILURES}
    )
    for run_id in {
        ours[o.attempt_id][0] for o in failed if o.error and o.error.category == ErrorCategory.BUDGET_EXCEEDED
    }:
        queue_budget_exceeded(run_id)  # in this transaction: the refusals and the event commit together
    _count_once_committed(completed_rows | failed_rows, {pk: provider for pk, (_, provider) in ours.items()})
    insert_rows(Artifact, [artifact for o in completed + failed for artifact in _artifacts(o, now)])
    _keep_in_cache(completed, now)
    _judge_once_committed({o.attempt_id: held[o.attempt_id].evaluator_profile_id for o in completed})
    # Failed ones too: their count of calls sent (answer_journal.mark_sent) is done with.
    recorded = [o.attempt_id for o in completed + failed]
    announce_chunk_recorded(recorded)  # into the boards' summaries, in this transaction (issue 31)
    after_commit(answer_journal.forget, recorded)
    return len(mine)


def _count_once_committed(finished: dict[int, dict], provider_of: dict[int, str]) -> None:
    """Count the attempts this transaction moved to completed or failed, once it commits: only
    rows the token still held are here, so a job run twice (or a late worker) counts none."""
    if not finished:
        return
    rows = [
        (row["status"], row["outcome"], row.get("error_category", ""), provider_of[pk]) for pk, row in finished.items()
    ]
    transaction.on_commit(functools.partial(metrics.count_attempts_finished, rows), robust=True)


def _keep_in_cache(completed: list[Outcome], now: datetime) -> None:
    """Store the answers of calls made under a cache key; count the reuses of stored ones."""
    made = [(o.cache, o.attempt_id, o.completion) for o in completed if o.cache and not o.cache.hit and o.completion]
    store_answers(made, now)
    count_hits([o.cache.hit.entry_id for o in completed if o.cache and o.cache.hit])


def _give_back(attempt_ids: list[int]) -> None:
    """Queue again attempts the platform failed before their provider call, with a job of
    their own once committed. Their claims still count: an attempt that keeps failing this
    way is retired as the platform's error by the claim limit, not tried for ever."""
    if not attempt_ids:
        return
    Attempt.objects.filter(pk__in=attempt_ids).update(**UNCLAIMED)
    by_run: dict[int, list[int]] = {}
    for run_id, attempt_id in Attempt.objects.filter(pk__in=attempt_ids).values_list("run_id", "pk"):
        by_run.setdefault(run_id, []).append(attempt_id)
    for run_id, ids in by_run.items():
        # Robust: with Redis down the job cannot be queued; the sweep rebuilds it later
        # (queued attempts without a job), and the attempts must be queued all the same.
        after_commit(enqueue_attempts, run_id, ids)


# An attempt back in the queue: nobody's, so a result from its last holder is refused.
UNCLAIMED = {"status": AttemptStatus.QUEUED, "claim_token": None, "claimed_by": "", "started_at": None}


def _judge_once_committed(profiles: dict[int, int | None]) -> None:
    """Answered attempts of runs with an evaluator profile (attempt id -> its run's profile, or
    None) go to the evaluator's queue.

    Robust: with Redis down the job cannot be queued, and raising after the commit would
    abort the job's flush before its other answers are written, which would then be handed
    back and paid for again. An answered attempt without a verdict is found by the recovery
    sweep (``requeue_unjudged``) and queued once Redis is back."""
    by_profile: dict[int, list[int]] = {}
    for attempt_id, profile_id in profiles.items():
        if profile_id is not None:
            by_profile.setdefault(profile_id, []).append(attempt_id)
    for profile_id, ids in by_profile.items():
        after_commit(enqueue_judging, profile_id, ids)


def record_failure(attempt_id: int, token: uuid.UUID, request: CompletionRequest | None, error: ProviderError) -> bool:
    return bool(record_outcomes(token, [Outcome(attempt_id, request, error=error)]))


def _give_back_claim(attempt_ids: list[int], token: uuid.UUID) -> int:
    return _still_ours(attempt_ids, token).update(**UNCLAIMED)


def _still_ours(attempt_ids: list[int], token: uuid.UUID):
    return Attempt.objects.filter(pk__in=attempt_ids, claim_token=token, status=AttemptStatus.RUNNING)


UNFINISHED = tuple(status for status in AttemptStatus.values if status not in ATTEMPT_TERMINAL)


def finish_run_if_done(run_id: int) -> str | None:
    """Mark a running run finished once every attempt is terminal. Safe to call any time:
    each worker calls it after committing, so the last one to finish always sees all."""
    attempts = Attempt.objects.filter(run_id=run_id)
    # The statuses still to finish, named: two ranges of the (run, status) index, where "not
    # terminal" made Postgres read past every finished attempt of the run (each job asks).
    if attempts.filter(status__in=UNFINISHED).exists():
        return None
    status = RunStatus.COMPLETED if attempts.filter(status=AttemptStatus.COMPLETED).exists() else RunStatus.FAILED
    with transaction.atomic():
        finished = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(
            status=status, finished_at=timezone.now()
        )
        if not finished:
            return None
        # With the update that made the transition: a rollback takes the event with it, and a
        # second caller (update count 0) never gets here.
        queue_run_finished(run_id, status)
        observe_run_duration(run_id)
    announce_run_changed(run_id)
    return status


def observe_run_duration(run_id: int) -> None:
    """Into the run-duration histogram, once the run's finish has committed: only the call
    whose update finished the run gets here, so each run is observed once."""
    status, started_at, finished_at = Run.objects.values_list("status", "started_at", "finished_at").get(pk=run_id)
    seconds = (finished_at - started_at).total_seconds() if started_at and finished_at else None
    transaction.on_commit(functools.partial(metrics.observe_run_finished, status, seconds), robust=True)
