"""An answer that arrived before its worker died is recorded from the journal, not paid twice."""

from decimal import Decimal
from typing import Any, cast

import pytest

from experiments import answer_journal
from experiments.actions import ArmSpec, do_replace_arms
from experiments.agent import _Loop
from experiments.models import AttemptStatus, RunStatus
from experiments.pipeline import arm_spec, claim_attempts, execute, first_calls, journal_answers
from experiments.trajectory import Trajectory
from prbench.queues import get_connection
from prbench.recovery import run_recovery_sweep
from providers import gateway
from providers.models import ProviderCredential
from providers.types import Completion, Usage
from tests.conftest import as_if_its_worker_died, work_queue
from tests.providers.contracts import gpt4o_answer
from tests.providers.fake_server import FakeProvider, Reply


@pytest.fixture
def provider():
    fake = FakeProvider()  # counts every call the provider would bill
    yield fake
    fake.close()


@pytest.fixture
def openai_experiment(experiment, org, provider):
    provider.default = Reply(200, gpt4o_answer("the first answer"))
    credential = ProviderCredential(org=org, provider="openai", base_url=provider.url + "/v1")
    credential.set_api_key("sk-test-journal-0000000")
    credential.save()
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0, "stream": False})])
    experiment.sample_size, experiment.repetitions = 3, 1
    experiment.save()
    return experiment


def answered_then_died(run) -> list[int]:
    """A worker claims the run's attempts and gets their answers, journalled as its job's thread
    takes them (BatchRunner._collect), then dies before recording."""
    ids = list(run.attempts.values_list("pk", flat=True))
    _token, attempts = claim_attempts(ids)
    arms = {attempt.arm_id: gateway.prepare(run.org_id, arm_spec(attempt)) for attempt in attempts}
    answer_journal.mark_sent_many(first_calls(attempts, arms))  # as the job counts its chunk's calls
    outcomes = [execute(attempt, arms[attempt.arm_id]) for attempt in attempts]
    assert all(outcome.completion is not None for outcome in outcomes)
    journal_answers(outcomes)
    as_if_its_worker_died(*ids)
    return ids


@pytest.mark.django_db(transaction=True)  # entries are forgotten when the record commits
def test_a_dead_workers_answers_are_recorded_once_from_the_journal(openai_experiment, start, provider):
    run = start(openai_experiment, inference_only=True)
    ids = answered_then_died(run)
    assert len(provider.seen) == 3
    provider.default = Reply(200, gpt4o_answer("a second answer, paid for again"))

    assert run_recovery_sweep()["reclaimed"] == 3
    work_queue()

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert len(provider.seen) == 3  # nothing asked twice
    recorded = list(run.attempts.values_list("status", "claims", "output", "warnings"))
    assert all(status == AttemptStatus.COMPLETED and claims == 2 for status, claims, _, _ in recorded)
    assert all(output == "the first answer" for _, _, output, _ in recorded)
    assert all(answer_journal.RECOVERED in warnings for *_, warnings in recorded)
    assert get_connection().exists(*map(answer_journal.journal_key, ids)) == 0  # forgotten once recorded


@pytest.mark.django_db(transaction=True)
def test_a_call_made_again_by_a_claim_that_then_died_is_counted_when_its_answer_is_recorded(
    openai_experiment, start, provider
):
    """Claim 1's calls are lost with its worker (died mid-call); claim 2 calls again and gets the
    answers, journals them and dies too; claim 3 records them from the journal. Claim 2 counted
    its repeat only in memory: the journal's count of calls sent is what records it."""
    run = start(openai_experiment, inference_only=True)
    ids = answered_then_died(run)
    get_connection().delete(*map(answer_journal.journal_key, ids))  # the answers never arrived
    assert run_recovery_sweep()["reclaimed"] == 3
    answered_then_died(run)
    assert len(provider.seen) == 6
    assert run_recovery_sweep()["reclaimed"] == 3
    work_queue()

    assert len(provider.seen) == 6  # the third claims asked nothing
    recorded = list(run.attempts.values_list("status", "claims", "repeat_calls"))
    assert recorded == [(AttemptStatus.COMPLETED, 3, 1)] * 3


def test_an_unreadable_entry_is_asked_again_not_trusted(openai_experiment, start, provider):
    run = start(openai_experiment, inference_only=True)
    ids = answered_then_died(run)
    get_connection().set(answer_journal.journal_key(ids[0]), b"{not json")
    run_recovery_sweep()
    work_queue()
    assert len(provider.seen) == 4  # the one unreadable entry's attempt called again
    assert run.attempts.filter(status=AttemptStatus.COMPLETED).count() == 3


def test_a_first_claim_never_reads_the_journal(openai_experiment, start, provider):
    """Only an attempt claimed again can have an answer waiting; a stray entry is not one."""
    run = start(openai_experiment, inference_only=True)
    stray = run.attempts.first()
    get_connection().set(answer_journal.journal_key(stray.pk), b"{not json")
    work_queue()
    assert len(provider.seen) == 3 and run.attempts.filter(claims=1, status=AttemptStatus.COMPLETED).count() == 3


def test_an_agents_kept_turns_carry_the_calls_sent_for_them_beyond_their_answer(db):
    """Turn 1 was answered on the first call; turn 2's first call died with its worker, and the
    claim that asked again journalled its answer and died as well: turn 2 was paid twice."""
    for turn, calls in ((1, 1), (2, 2), (3, 1)):
        for _ in range(calls):
            answer_journal.mark_sent(7001, turn)
    for turn in (1, 2):  # turn 3's only call never came back
        assert answer_journal.keep_turn(
            7001, turn, Completion(f"turn {turn}", "stop", Usage(10, 5), 40, Decimal("0.001"), "gpt-4o")
        )

    kept = answer_journal.kept_turns(7001)
    assert [completion.text for completion in kept.answers.values()] == ["turn 1", "turn 2"]
    assert kept.repeat_calls == {1: 0, 2: 1}  # turn 3 is asked again, and counted then

    # The loop of the claim that reads them back counts turn 2's lost call as it replays it.
    loop = _Loop(cast(Any, None), 7001, {}, "", "seed", kept, Trajectory(), claims=3)
    assert [loop._turn(turn, cast(Any, None)) for turn in (1, 2)] == [
        (answer, True) for answer in kept.answers.values()
    ]
    assert loop.repeat_calls == 1


@pytest.mark.django_db(transaction=True)
def test_an_attempt_retired_after_its_workers_died_mid_call_counts_the_calls_made_again(
    openai_experiment, start, settings, provider
):
    """Killed mid-call on each of its claims, an attempt is retired by the next claim: the
    provider was paid for every call, none answered; all but the first were calls made again."""
    run = start(openai_experiment, inference_only=True)
    first, *others = run.attempts.order_by("sequence").values_list("pk", flat=True)
    run.attempts.filter(pk=first).update(claims=settings.PRBENCH_MAX_ATTEMPT_CLAIMS)
    for _ in range(settings.PRBENCH_MAX_ATTEMPT_CLAIMS):
        answer_journal.mark_sent(first)  # each claim's call went out; its worker died before the answer
    _token, claimed = claim_attempts([first, *others])

    assert [attempt.pk for attempt in claimed] == others
    retired = run.attempts.get(pk=first)
    assert (retired.status, retired.error_category) == (AttemptStatus.FAILED, "platform_error")
    assert retired.repeat_calls == settings.PRBENCH_MAX_ATTEMPT_CLAIMS - 1
    assert not get_connection().exists(answer_journal.sent_key(first))
    assert run.attempts.exclude(pk=first).filter(repeat_calls__gt=0).count() == 0
