import pytest

from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.registry import arm_errors
from providers.types import ArmSpec, CompletionRequest, Message

pytestmark = pytest.mark.django_db  # the gateway reads the org's allowlist and credentials

REQUEST = CompletionRequest(messages=(Message("user", "hi"),), seed_key="1:t:a:0")


def test_it_returns_a_normalised_completion():
    completion = gateway.complete(1, ArmSpec("mock", "m", {"mode": "empty"}), REQUEST)
    assert completion.retries == 0
    assert completion.usage.input_tokens > 0


def test_retryable_errors_are_retried_then_raised_with_the_count():
    arm = ArmSpec(
        "mock", "m", {"mode": "error", "failure_category": "server_error", "max_retries": 2, "retry_base_ms": 1}
    )
    with pytest.raises(ProviderError) as caught:
        gateway.complete(1, arm, REQUEST)
    assert caught.value.category == ErrorCategory.SERVER_ERROR
    assert caught.value.retries == 2


def test_permanent_errors_are_not_retried():
    arm = ArmSpec(
        "mock", "m", {"mode": "error", "failure_category": "authentication", "max_retries": 5, "retry_base_ms": 1}
    )
    with pytest.raises(ProviderError) as caught:
        gateway.complete(1, arm, REQUEST)
    assert caught.value.retries == 0


def test_a_flaky_call_succeeds_on_retry_and_records_it():
    retried = []
    for i in range(40):
        request = CompletionRequest(messages=REQUEST.messages, seed_key=f"9:t{i}:a:0")
        arm = ArmSpec("mock", "m", {"mode": "empty", "failure_rate": 0.3, "max_retries": 8, "retry_base_ms": 1})
        retried.append(gateway.complete(1, arm, request).retries)
    assert max(retried) >= 1 and min(retried) == 0


def test_unknown_provider_is_refused_by_name():
    providers = "anthropic, azure_openai, http_agent, mock, openai, openai_compatible, openrouter, replay"
    assert arm_errors("openai-ish", "gpt", {}) == [f"provider 'openai-ish' is not supported (choose from {providers})"]
    assert arm_errors("mock", " ", {}) == ["model_name must not be empty"]
    assert arm_errors("mock", "m", []) == ["config must be an object"]


def test_an_adapter_crash_is_an_unknown_error_not_a_crashed_job(monkeypatch, caplog):
    from providers.adapters.mock.adapter import MockAdapter

    def explode(self, request):
        raise KeyError("sk-secret-in-a-message")

    monkeypatch.setattr(MockAdapter, "generate", explode)
    with pytest.raises(ProviderError) as caught:
        gateway.complete(1, ArmSpec("mock", "m", {}), REQUEST)
    assert caught.value.category == ErrorCategory.UNKNOWN
    assert caught.value.retries == 0
    assert "KeyError" in caught.value.message and "sk-secret" not in str(caught.value)
    assert "KeyError" in caplog.text and "sk-secret" not in caplog.text


def test_an_allowlist_change_reaches_a_cached_worker_on_its_next_call(org):
    from providers.actions import do_allow, do_disallow
    from providers.policy import governance_version

    arm = ArmSpec("mock", "m", {"mode": "empty"})
    gateway.complete(org.pk, arm, REQUEST)  # governance now cached under the current version
    before = governance_version(org.pk)
    do_allow(org, "openai", "")  # mock is no longer on the (now non-empty) allowlist
    assert governance_version(org.pk) != before
    with pytest.raises(ProviderError) as caught:
        gateway.complete(org.pk, arm, REQUEST)
    assert caught.value.category == ErrorCategory.NOT_ALLOWED
    do_disallow(org, "openai")
    assert gateway.complete(org.pk, arm, REQUEST).retries == 0


def test_governance_is_cached_between_calls_and_survives_a_lost_redis(org, clean_redis, django_assert_num_queries):
    arm = ArmSpec("mock", "m", {"mode": "empty"})
    gateway.complete(org.pk, arm, REQUEST)
    with django_assert_num_queries(0):  # the allowlist and the price are not read again
        gateway.complete(org.pk, arm, REQUEST)
    clean_redis.flushdb()  # Redis restarted empty: the version is new, so the cache is not trusted
    with django_assert_num_queries(1):
        gateway.complete(org.pk, arm, REQUEST)


def test_a_governance_change_is_announced_again_once_it_commits(org, django_capture_on_commit_callbacks):
    from providers.actions import do_allow
    from providers.policy import governance_version

    before = governance_version(org.pk)
    with django_capture_on_commit_callbacks(execute=True):
        do_allow(org, "mock", "")
        during = governance_version(org.pk)
    # Twice: a worker that re-cached the old rows under the first token before the change
    # committed must miss its cache again afterwards.
    assert len({before, during, governance_version(org.pk)}) == 3
