"""Hard budgets: a call that would pass the run's or the experiment's budget is not made.

The provider is the real OpenAI adapter against a local server; spend is kept in the test
Redis database, as in production. Every call here costs exactly what it reserves (the
server reports the estimated prompt tokens and the full output ceiling), so which calls
fit a budget does not depend on the order the threads run in.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace
from datetime import date
from decimal import ROUND_DOWN, Decimal

import pytest
from django.core.exceptions import ValidationError

from experiments.actions import ArmSpec, check_start_run, do_replace_arms
from experiments.models import AttemptStatus
from prbench.queues import get_connection
from providers import gateway
from providers.budget import Budget, experiment_budget_key, release, reserve, run_budget_key, settle, to_nano
from providers.errors import ErrorCategory, ProviderError
from providers.models import Price, ProviderCredential
from providers.types import ArmSpec as GatewayArm
from providers.types import CompletionRequest, Message
from tests.conftest import work_queue
from tests.providers.fake_server import FakeProvider, Reply, Seen

MAX_TOKENS = 1000
INPUT_PER_MTOK, OUTPUT_PER_MTOK = Decimal(2), Decimal(100)  # about $0.10 a call: budgets are in cents


def prompt_tokens(seen: Seen) -> int:
    """What the gateway estimates for this request: its prompt text at ~4 characters a token."""
    text = "\n".join(["", *(m["content"] for m in seen.body["messages"])])
    return math.ceil(len(text) / 4)


def answer_at_the_ceiling(seen: Seen) -> Reply:
    return Reply(
        200,
        {
            "id": f"chatcmpl-{len(seen.body['messages'][0]['content'])}",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "no diff"}, "finish_reason": "length"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens(seen),
                "completion_tokens": MAX_TOKENS,
                "total_tokens": prompt_tokens(seen) + MAX_TOKENS,
            },
        },
    )


@pytest.fixture
def server():
    fake = FakeProvider()
    fake.responder = answer_at_the_ceiling
    yield fake
    fake.close()


@pytest.fixture
def priced_openai(org, server):
    credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1")
    credential.set_api_key("sk-test-budget-0000000")
    credential.save()
    Price.objects.create(
        provider="openai",
        model_pattern="budget-test-model",
        input_per_mtok=INPUT_PER_MTOK,
        output_per_mtok=OUTPUT_PER_MTOK,
        valid_from=date(2024, 1, 1),
    )


@pytest.fixture
def one_task_six_times(experiment, priced_openai):
    """One task repeated: every call has the same prompt, so the same cost."""
    do_replace_arms(
        experiment, [ArmSpec("gpt", "openai", "budget-test-model", {"max_tokens": MAX_TOKENS, "max_retries": 0})]
    )
    experiment.sample_size, experiment.repetitions = 1, 6
    experiment.save()
    return experiment


def call_cost(experiment) -> Decimal:
    """The cost of one call of the one-task experiment, computed by hand from its prompt."""
    from experiments.estimate import estimate_run

    tokens = estimate_run(experiment).arms[0].input_tokens // experiment.repetitions
    return (tokens * INPUT_PER_MTOK + MAX_TOKENS * OUTPUT_PER_MTOK) / 1_000_000


def cents_for(calls: float, cost: Decimal) -> Decimal:
    return (Decimal(str(calls)) * cost).quantize(Decimal("0.01"), rounding=ROUND_DOWN)


def test_a_run_budget_allows_exactly_the_calls_it_can_pay(one_task_six_times, server, start):
    cost = call_cost(one_task_six_times)
    limit = cents_for(4.5, cost)
    assert int(limit // cost) == 4  # the budget pays for four calls and not a fifth

    run = start(one_task_six_times, inference_only=True, budget_usd=limit)
    work_queue()

    run.refresh_from_db()
    assert run.status == "completed"
    assert len(server.seen) == 4
    attempts = run.attempts.all()
    assert sorted(a.status for a in attempts) == [AttemptStatus.COMPLETED] * 4 + [AttemptStatus.FAILED] * 2
    refused = attempts.filter(status=AttemptStatus.FAILED)
    assert set(refused.values_list("error_category", flat=True)) == {ErrorCategory.BUDGET_EXCEEDED}
    assert all(f"the run budget of ${limit} would be passed" in a.error_message for a in refused)
    assert sum(a.cost_usd for a in attempts.filter(status=AttemptStatus.COMPLETED)) == 4 * cost
    assert int(get_connection().get(run_budget_key(run.pk))) == to_nano(4 * cost)


@pytest.mark.parametrize(
    ("run_calls", "experiment_calls", "made", "named"), [(4.5, 2.5, 2, "experiment"), (1.5, 3.5, 1, "run")]
)
def test_the_tighter_of_two_budgets_wins(one_task_six_times, server, start, run_calls, experiment_calls, made, named):
    cost = call_cost(one_task_six_times)
    one_task_six_times.budget_usd = cents_for(experiment_calls, cost)
    one_task_six_times.save()
    assert int(min(cents_for(run_calls, cost), one_task_six_times.budget_usd) // cost) == made

    run = start(one_task_six_times, inference_only=True, budget_usd=cents_for(run_calls, cost))
    work_queue()

    assert len(server.seen) == made
    refused = run.attempts.filter(error_category=ErrorCategory.BUDGET_EXCEEDED)
    assert refused.count() == 6 - made
    assert all(f"the {named} budget of" in a.error_message for a in refused)


def test_spend_is_rebuilt_from_the_database_after_redis_loses_it(one_task_six_times, server, start):
    cost = call_cost(one_task_six_times)
    one_task_six_times.budget_usd = cents_for(8.5, cost)
    one_task_six_times.save()
    assert int(one_task_six_times.budget_usd // cost) == 8
    first = start(one_task_six_times, inference_only=True)
    work_queue()
    assert len(server.seen) == 6

    get_connection().flushdb()  # Redis restarted: the experiment's spend is gone from it
    second = start(one_task_six_times, inference_only=True)
    work_queue()

    assert len(server.seen) == 8  # the six recorded in the database still count
    assert second.attempts.filter(error_category=ErrorCategory.BUDGET_EXCEEDED).count() == 4
    assert first.attempts.filter(status=AttemptStatus.COMPLETED).count() == 6
    assert int(get_connection().get(experiment_budget_key(one_task_six_times.pk))) == to_nano(8 * cost)


def test_a_budgeted_run_page_says_how_many_attempts_were_not_made(one_task_six_times, server, start, bob):
    from django.urls import reverse

    from tests.conftest import client_for

    cost = call_cost(one_task_six_times)
    limit = cents_for(4.5, cost)
    run = start(one_task_six_times, inference_only=True, budget_usd=limit)
    work_queue()

    response = client_for(bob).get(reverse("experiments:run", args=[run.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert f"Run budget ${limit}: ${4 * cost:.4f} spent." in content
    assert "Budget reached: 2 attempts were not made" in content
    # At the top, with the refusal's own words: which budget, and its limit.
    top = content.split('class="runbar"')[0]
    assert "Budget reached" in top and f"the run budget of ${limit} would be passed" in top


def test_a_run_without_a_budget_says_nothing_of_budgets(experiment, start, bob):
    from django.urls import reverse

    from tests.conftest import client_for

    run = start(experiment, inference_only=True)
    work_queue()
    content = client_for(bob).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert "Run budget" not in content and "Experiment budget" not in content and "Budget reached" not in content


@pytest.mark.parametrize("which", ["run", "experiment"])
def test_a_budget_is_refused_for_an_arm_without_a_price(experiment, org, which):
    credential = ProviderCredential(org=org, provider="openai", base_url="http://127.0.0.1:9/v1")
    credential.set_api_key("sk-test-unpriced-000000")
    credential.save()
    do_replace_arms(
        experiment,
        [
            ArmSpec("priced mock", "mock", "mock-oracle", {"price_input_per_mtok": 1, "price_output_per_mtok": 2}),
            ArmSpec("unpriced", "openai", "gpt-unheard-of"),
        ],
    )
    check_start_run(experiment)  # without a budget, an unknown price is only unknown
    if which == "experiment":
        experiment.budget_usd = Decimal("5.00")
        experiment.save()

    with pytest.raises(ValidationError) as refused:
        check_start_run(experiment, budget_usd=Decimal("5.00") if which == "run" else None)

    assert refused.value.messages == [
        f"arm 'unpriced': openai/gpt-unheard-of has no known price, so the {which} budget cannot be enforced "
        "(add a price to the catalog, or start the run without a budget)"
    ]


# --- the gateway and the Redis script ------------------------------------------------------


def budget(limit: str, recorded: str = "0", key: str = "prbench:budget:test") -> Budget:
    return Budget(key, "run budget", Decimal(limit), Decimal(recorded))


def spent(key: str = "prbench:budget:test") -> Decimal:
    value = get_connection().get(key)
    assert isinstance(value, bytes), f"no spend kept under {key}"
    return Decimal(int(value)) / 10**9


def test_concurrent_reservations_never_overspend():
    limit = budget("1.00")
    start_together = threading.Barrier(40)
    made: list[bool] = []

    def take() -> None:
        start_together.wait()
        try:
            reserve((limit,), Decimal("0.07"))
            made.append(True)
        except ProviderError as exc:
            assert exc.category == ErrorCategory.BUDGET_EXCEEDED and not exc.retryable
            made.append(False)

    threads = [threading.Thread(target=take) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert made.count(True) == 14  # 14 x 0.07 = 0.98; a fifteenth would pass 1.00
    assert spent() == Decimal("0.98")


def test_a_refused_reservation_takes_nothing_from_any_budget():
    loose, tight = budget("1.00", key="prbench:budget:loose"), budget("0.10", key="prbench:budget:tight")
    reserve((loose, tight), Decimal("0.08"))
    with pytest.raises(ProviderError, match=r"the run budget of \$0.10 would be passed: \$0.08 is spent or reserved"):
        reserve((loose, tight), Decimal("0.05"))
    assert (spent("prbench:budget:loose"), spent("prbench:budget:tight")) == (Decimal("0.08"), Decimal("0.08"))


def test_settling_at_the_actual_cost_frees_headroom():
    limit = budget("1.00")
    first = reserve((limit,), Decimal("0.60"))
    with pytest.raises(ProviderError):
        reserve((limit,), Decimal("0.60"))

    settle(first, Decimal("0.10"))
    second = reserve((limit,), Decimal("0.60"))
    assert spent() == Decimal("0.70")
    release(second)
    assert spent() == Decimal("0.10")


def test_a_missing_key_starts_from_the_recorded_spend():
    with pytest.raises(ProviderError, match=r"\$0.9 is spent or reserved"):
        reserve((budget("1.00", recorded="0.90"),), Decimal("0.20"))
    get_connection().flushdb()
    reservation = reserve((budget("1.00", recorded="0.50"),), Decimal("0.20"))
    get_connection().flushdb()  # lost again before the call settles: recorded spend plus the cost
    settle(reservation, Decimal("0.15"))
    assert spent() == Decimal("0.65")


@pytest.fixture
def prepared(org, priced_openai, server):
    arm = GatewayArm("openai", "budget-test-model", {"max_retries": 0, "max_tokens": MAX_TOKENS, "timeout_read_s": 0.5})
    return gateway.prepare(org.pk, arm)


REQUEST = CompletionRequest(messages=(Message("user", "x" * 399),), max_output_tokens=MAX_TOKENS)
# 400 characters with the empty system prompt: 100 tokens at $2/M, 1000 at $100/M.
MOST = Decimal("0.1002")


def test_a_refused_call_gives_its_reservation_back(prepared, server):
    server.responder = None
    server.default = Reply(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
    limited = replace(prepared, budgets=(budget("1.00"),))

    with pytest.raises(ProviderError) as failed:
        gateway.call(limited, REQUEST)

    assert failed.value.category == ErrorCategory.BAD_REQUEST
    assert spent() == 0


def test_a_timed_out_call_keeps_its_reservation(prepared, server):
    server.responder = None
    server.default = Reply(200, {}, delay_s=2)
    limited = replace(prepared, budgets=(budget("1.00"),))

    with pytest.raises(ProviderError) as failed:
        gateway.call(limited, REQUEST)

    assert failed.value.category == ErrorCategory.TIMEOUT
    assert spent() == MOST  # the provider may have billed it: the most it could cost stays spent


def test_an_answered_call_is_settled_at_its_cost(prepared, server):
    limited = replace(prepared, budgets=(budget("1.00"),))

    completion = gateway.call(limited, REQUEST)

    assert completion.cost_usd == MOST
    assert spent() == MOST


def test_a_call_over_budget_is_not_made(prepared, server):
    limited = replace(prepared, budgets=(budget("0.01"),))

    with pytest.raises(ProviderError) as refused:
        gateway.call(limited, REQUEST)

    assert refused.value.category == ErrorCategory.BUDGET_EXCEEDED
    assert server.seen == []
    assert get_connection().get("prbench:budget:test") == b"0"


def test_a_budgeted_call_without_a_price_is_not_made(prepared, server):
    unpriced = replace(prepared, price=None, budgets=(budget("1.00"),))

    with pytest.raises(ProviderError, match="openai/budget-test-model has no known price") as refused:
        gateway.call(unpriced, REQUEST)

    assert refused.value.category == ErrorCategory.BUDGET_EXCEEDED
    assert server.seen == []


def test_the_evaluator_judges_only_the_calls_that_were_made(
    one_task_six_times, server, start, django_capture_on_commit_callbacks
):
    from evaluation.models import EvaluatorProfile, Verdict

    EvaluatorProfile.objects.create(
        name="mock-reviewer", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )
    limit = cents_for(2.5, call_cost(one_task_six_times))
    run = start(one_task_six_times, inference_only=True, budget_usd=limit)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # the attempts; recording them queues the evaluator's jobs on commit
    work_queue()  # the evaluator's jobs

    judged = set(Verdict.objects.filter(attempt__run=run).values_list("attempt_id", flat=True))
    made = set(run.attempts.filter(status=AttemptStatus.COMPLETED).values_list("pk", flat=True))
    assert judged == made and len(made) == 2
    assert run.attempts.filter(error_category=ErrorCategory.BUDGET_EXCEEDED).count() == 4


def test_settling_after_the_answer_never_raises_when_redis_is_away(monkeypatch, caplog):
    """The provider answered and was paid: a Redis that went away must not turn that answer
    into an error (the attempt would be given back and asked for, and paid, again)."""
    import socket

    from redis import Redis

    from providers import budget

    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(budget, "get_connection", lambda: Redis(port=port, socket_connect_timeout=1))
    reservation = budget.Reservation((budget.Budget("prbench:budget:run:0", "run budget", Decimal(1)),), 10)
    budget.settle(reservation, Decimal("0.01"))
    assert "could not settle a budget reservation" in caplog.text
