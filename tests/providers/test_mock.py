import time
from decimal import Decimal

import pytest

from evaluation.patches import extract_patch
from evaluation.validation import validate_patch
from experiments.demo import demo_task_dirs, read_task_dir
from providers.adapters.mock import MockAdapter, no_op_rewrite
from providers.errors import ErrorCategory, ProviderError
from providers.types import ArmSpec, CompletionRequest, Message

TASK = read_task_dir(demo_task_dirs()[2], 2)


def request(seed_key="7:task:arm:0", gold=TASK["gold_patch"]):
    return CompletionRequest(messages=(Message("user", "fix it"),), seed_key=seed_key, reference_output=gold)


def generate(config, seed_key="7:task:arm:0", model="m"):
    return MockAdapter(ArmSpec("mock", model, config)).generate(request(seed_key))


def test_oracle_returns_the_gold_patch():
    completion = generate({"mode": "oracle"})
    assert extract_patch(completion.text) == TASK["gold_patch"]
    assert completion.finish_reason == "stop"
    assert completion.model_served == "m"


def test_it_is_deterministic_for_a_seed_key():
    config = {"mode": "noisy", "quality": 0.5, "jitter_ms": 5}
    outputs = {generate(config, f"1:t{i}:a:0").text for i in range(30)}
    again = {generate(config, f"1:t{i}:a:0").text for i in range(30)}
    assert outputs == again
    assert len(outputs) > 1, "a noisy mock must vary across tasks"
    assert generate(config, "1:t3:a:0").latency_ms == generate(config, "1:t3:a:0").latency_ms


def test_noisy_with_zero_quality_never_resolves():
    for i in range(8):
        text = generate({"mode": "noisy", "quality": 0.0}, f"3:t:a:{i}").text
        result = validate_patch(TASK["repo_files"], extract_patch(text), TASK["test_command"], 30)
        assert not result.passed, text


def test_no_op_rewrite_applies_but_does_not_fix():
    wrong = no_op_rewrite(TASK["gold_patch"])
    assert wrong
    result = validate_patch(TASK["repo_files"], wrong, TASK["test_command"], 30)
    assert result.applied and not result.passed


def test_empty_mode_answers_nothing():
    assert generate({"mode": "empty"}).text == ""


def test_error_mode_raises_its_category():
    with pytest.raises(ProviderError) as caught:
        generate({"mode": "error", "failure_category": "rate_limited"})
    assert caught.value.category == ErrorCategory.RATE_LIMITED
    assert caught.value.retryable


def test_it_really_waits():
    started = time.monotonic()
    completion = generate({"latency_ms": 80})
    assert time.monotonic() - started >= 0.08
    assert completion.latency_ms == 80


def test_cost_uses_the_arm_prices_and_is_unknown_without_them():
    priced = generate({"price_input_per_mtok": 2, "price_output_per_mtok": 10})
    expected = (Decimal(priced.usage.input_tokens) * 2 + Decimal(priced.usage.output_tokens) * 10) / 1_000_000
    assert priced.cost_usd == expected.quantize(Decimal("0.00000001"))
    assert priced.usage.output_tokens > 0
    assert generate({}).cost_usd is None


@pytest.mark.parametrize(
    "config, field",
    [
        ({"mode": "genius"}, "config.mode"),
        ({"quality": 1.5}, "config.quality"),
        ({"latency_ms": "fast"}, "config.latency_ms"),
        ({"failure_category": "meteor"}, "config.failure_category"),
    ],
)
def test_bad_config_names_the_field(config, field):
    errors = MockAdapter.config_errors("m", config)
    assert len(errors) == 1 and errors[0].startswith(field)


def question(seed_key: str) -> CompletionRequest:
    return CompletionRequest(
        messages=(Message("user", "2 + 2?"),), seed_key=seed_key, reference_output="Answer: B", distractors=("A", "C")
    )


def answer_of(config, seed_key="7:q1:arm:0") -> str:
    return MockAdapter(ArmSpec("mock", "m", config)).generate(question(seed_key)).text


def test_a_question_gets_the_reference_or_one_of_its_wrong_answers():
    """oracle: the reference as it is (no diff fence); wrong: one of the task's wrong answers;
    noisy: the reference at its quality, the same answers for the same seed keys."""
    assert answer_of({"mode": "oracle"}) == "Answer: B"
    assert {answer_of({"mode": "wrong"}, f"7:q{i}:a:0") for i in range(20)} == {"A", "C"}
    noisy = [answer_of({"mode": "noisy", "quality": 0.7}, f"7:q{i}:a:0") for i in range(200)]
    assert 0.6 < noisy.count("Answer: B") / 200 < 0.8
    assert noisy == [answer_of({"mode": "noisy", "quality": 0.7}, f"7:q{i}:a:0") for i in range(200)]


def test_wrong_gives_a_plausible_patch_that_changes_nothing():
    text = generate({"mode": "wrong"}).text
    assert extract_patch(text) == no_op_rewrite(TASK["gold_patch"]) != ""
