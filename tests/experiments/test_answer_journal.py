"""An answer that arrived before its worker died is recorded from the journal, not paid twice."""

import pytest

from experiments import answer_journal
from experiments.actions import ArmSpec, do_replace_arms
from experiments.models import AttemptStatus, RunStatus
from experiments.pipeline import arm_spec, claim_attempts, execute
from prbench.queues import get_connection
from prbench.recovery import run_recovery_sweep
from providers import gateway
from providers.models import ProviderCredential
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
    """A worker claims the run's attempts and gets their answers, then dies before recording."""
    ids = list(run.attempts.values_list("pk", flat=True))
    _token, attempts = claim_attempts(ids)
    for attempt in attempts:
        assert execute(attempt, gateway.prepare(run.org_id, arm_spec(attempt))).completion is not None
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
