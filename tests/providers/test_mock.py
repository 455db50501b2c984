"""The mock provider: deterministic for a seed, and as blind as a real provider. It reads the
task in the messages it is sent (its reference books hold the answers), never anywhere else."""

import ast
import dataclasses
import time
from decimal import Decimal
from pathlib import Path

import pytest

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.patches import extract_patch
from evaluation.validation import validate_patch
from evaluation.workloads import workload_for
from evaluation.workloads.multiple_choice import DEFAULT_PROMPT as MC_PROMPT
from evaluation.workloads.multiple_choice import MultipleChoice
from evaluation.workloads.pr_patch import DEFAULT_PROMPT as PR_PROMPT
from evaluation.workloads.qa_exact import BUILTIN_PROMPTS as QA_PROMPTS
from experiments.mock_books import ReferenceTask, book_of
from providers.adapters.mock import mock_book
from providers.adapters.mock.adapter import DONT_KNOW, MockAdapter, no_op_rewrite
from providers.errors import ErrorCategory, ProviderError
from providers.types import ArmSpec, CompletionRequest, Message

TASK = read_task_dir(demo_task_dirs()[2], 2)
OTHER_TASK = read_task_dir(demo_task_dirs()[5], 5)
PROVIDERS = Path(__file__).resolve().parents[2] / "providers"


def pr_task(fields: dict) -> ReferenceTask:
    return ReferenceTask(fields["external_id"], fields["problem_statement"], {}, fields["gold_patch"])


def pr_prompt(fields: dict) -> str:
    return workload_for("pr_patch").render_prompt(PR_PROMPT, pr_task(fields), lambda: "--- app.py ---\n...")


@pytest.fixture(autouse=True)
def demo_book():
    """The mock knows the demo's PR tasks, as a run on them would have it know them."""
    mock_book.register_book("demo", book_of(workload_for("pr_patch"), [pr_task(TASK), pr_task(OTHER_TASK)]))


def request(seed_key="7:task:arm:0", prompt=None):
    return CompletionRequest(messages=(Message("user", prompt or pr_prompt(TASK)),), seed_key=seed_key)


def generate(config, seed_key="7:task:arm:0", model="m", prompt=None):
    return MockAdapter(ArmSpec("mock", model, config)).generate(request(seed_key, prompt))


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


MC = MultipleChoice()
ADDITION = ReferenceTask("add", "2 + 2?", {"choices": ["3", "4", "5"], "answer": "B"}, "")


def mc_prompt(task: ReferenceTask, template: str = MC_PROMPT) -> str:
    return MC.render_prompt(template, task, lambda: "")


def question(seed_key: str, prompt: str = "") -> CompletionRequest:
    return CompletionRequest(messages=(Message("user", prompt or mc_prompt(ADDITION)),), seed_key=seed_key)


def answer_of(config, seed_key="7:q1:arm:0", prompt: str = "") -> str:
    return MockAdapter(ArmSpec("mock", "m", config)).generate(question(seed_key, prompt)).text


@pytest.fixture
def quiz():
    mock_book.register_book("quiz", book_of(MC, [ADDITION]))


def test_a_question_gets_the_reference_or_one_of_its_wrong_answers(quiz):
    """oracle: the reference as it is (no diff fence); wrong: one of the task's wrong answers;
    noisy: the reference at its quality, the same answers for the same seed keys."""
    assert answer_of({"mode": "oracle"}) == "Answer: B"
    assert {answer_of({"mode": "wrong"}, f"7:q{i}:a:0") for i in range(20)} == {"Answer: A", "Answer: C"}
    noisy = [answer_of({"mode": "noisy", "quality": 0.7}, f"7:q{i}:a:0") for i in range(200)]
    assert 0.6 < noisy.count("Answer: B") / 200 < 0.8
    assert noisy == [answer_of({"mode": "noisy", "quality": 0.7}, f"7:q{i}:a:0") for i in range(200)]


def test_the_same_messages_get_the_same_answer(quiz):
    for mode in ("oracle", "noisy", "wrong"):
        config = {"mode": mode, "quality": 0.5}
        assert [answer_of(config, f"3:q{i}:a:0") for i in range(20)] == [
            answer_of(config, f"3:q{i}:a:0") for i in range(20)
        ]
    assert generate({"mode": "noisy", "quality": 0.5}).text == generate({"mode": "noisy", "quality": 0.5}).text


@pytest.mark.parametrize("mode", ["oracle", "noisy", "wrong"])
def test_messages_without_the_task_get_i_dont_know(quiz, mode):
    """Whatever the mock was told out of band (a seed key naming the task), a prompt that
    does not carry the task gets no answer: the PR prompt with its placeholder left, the
    question without its options, a prompt about something else."""
    config = {"mode": mode, "quality": 0.5}
    for prompt in (
        PR_PROMPT,
        "2 + 2?",  # the question, but not the options the book knows it by
        "What is the capital of France?",
    ):
        assert answer_of(config, "7:add:arm:0", prompt) == DONT_KNOW, prompt
        assert MockAdapter(ArmSpec("mock", "m", config)).generate(request(prompt=prompt)).text == DONT_KNOW
    assert answer_of({"mode": "empty"}, "7:add:arm:0", "2 + 2?") == ""


def test_a_book_registered_nowhere_is_not_known():
    mock_book.forget_books()
    assert generate({"mode": "oracle"}).text == DONT_KNOW


def test_a_few_shot_prompt_gets_the_answer_of_the_question_it_asks_last():
    """Solved examples of other tasks of the book come first; the question asked comes last."""
    qa = workload_for("qa_exact")
    tasks = [ReferenceTask(f"j{i}", clue, {"answer": answer}, "") for i, (clue, answer) in enumerate(CLUES)]
    mock_book.register_book("jeopardy", book_of(qa, tasks))
    template = QA_PROMPTS["few-shot@1"]
    for asked in tasks:
        examples = "\n\n".join(qa.render_example(task) for task in tasks if task is not asked)
        prompt = qa.render_prompt(template.replace("{{examples}}", examples), asked, lambda: "")
        assert answer_of({"mode": "oracle"}, prompt=prompt) == qa.reference_output(asked), asked.external_id


CLUES = [
    ("This river flows through Cairo", "the Nile"),
    ("This river flows through Cairo and Khartoum", "the Nile"),  # the first clue is inside it
    ("The largest ocean on Earth", "the Pacific"),
    ("Of all the oceans, The largest ocean on Earth", "the Pacific Ocean"),  # ends as the one before
    ("He wrote Moby-Dick", "Herman Melville"),
]


def test_two_questions_with_the_same_text_and_other_options_each_get_their_own_letter():
    same = "Which of the following is true?"
    first = ReferenceTask("m1", same, {"choices": ["Fire is cold", "Ice is cold", "Sand is wet"], "answer": "B"}, "")
    second = ReferenceTask("m2", same, {"choices": ["Rain is dry", "Snow is hot", "Water is wet"], "answer": "C"}, "")
    mock_book.register_book("mmlu", book_of(MC, [first, second]))
    assert answer_of({"mode": "oracle"}, prompt=mc_prompt(first)) == "Answer: B"
    assert answer_of({"mode": "oracle"}, prompt=mc_prompt(second)) == "Answer: C"
    wrong = {answer_of({"mode": "wrong"}, f"1:m2:a:{i}", mc_prompt(second)) for i in range(20)}
    assert wrong == {"Answer: A", "Answer: B"}


def test_a_task_is_known_by_its_text_whatever_its_line_endings_and_outer_spaces():
    """SWE-bench's problem statements hold CRLF line endings; a rendering may fold them, or
    trim the text it puts in a template."""
    statement = "Logging is set up on import.\r\nExample:\r\n```\r\nCould not import pillow\r\n```\r\n"
    task = ReferenceTask("pydicom-901", statement, {}, TASK["gold_patch"])
    mock_book.register_book("swebench", book_of(workload_for("pr_patch"), [task]))
    folded = statement.replace("\r\n", "\n")
    for prompt in (statement, folded, folded.strip(), f"Problem:\n{statement.strip()}\n\nFiles: ..."):
        assert extract_patch(generate({"mode": "oracle"}, prompt=prompt).text) == TASK["gold_patch"], repr(prompt)


def test_a_question_in_two_books_is_answered_from_the_one_used_last(quiz):
    other = ADDITION._replace(payload={**ADDITION.payload, "answer": "C"})  # a dataset that disagrees
    assert answer_of({"mode": "oracle"}) == "Answer: B"
    # What the mock found for a prompt is remembered only while the books stay as they were.
    mock_book.register_book("disagrees", book_of(MC, [other]))
    assert answer_of({"mode": "oracle"}) == "Answer: C"
    assert mock_book.has_book("quiz")  # the quiz's run asks again: its book is the latest used
    assert answer_of({"mode": "oracle"}) == "Answer: B"
    mock_book.forget_books()
    assert answer_of({"mode": "oracle"}) == DONT_KNOW


def test_a_process_keeps_a_bounded_number_of_books(quiz):
    for index in range(mock_book.MAX_BOOKS):
        mock_book.register_book(("dataset", index), mock_book.Book([]))
    assert not mock_book.has_book("quiz")
    assert answer_of({"mode": "oracle"}) == DONT_KNOW


def test_a_request_carries_nothing_that_tells_the_answer():
    """The fields of a request are what a provider is sent, and the seed; a replay arm's
    recorded answer is the one exception (a playback of another system's answers)."""
    fields = {field.name for field in dataclasses.fields(CompletionRequest)}
    assert fields == {
        "messages",
        "system",
        "max_output_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed_key",
        "response_schema",
        "response_schema_name",
        "recorded_answer",
        # An agent's tools, and the task as an agent service is sent it (no answer in it).
        "tools",
        "agent_task",
        # The same on every claim of an attempt (its public code), for providers that take one.
        "idempotency_key",
    }
    for path in PROVIDERS.rglob("*.py"):
        text = path.read_text()
        for word in ("reference_output", "distractors", "gold_patch", "expected_answer"):
            assert word not in text, f"{path.relative_to(PROVIDERS.parent)} mentions {word}"


def test_providers_import_nothing_that_knows_the_tasks():
    """The layers: experiments fills the mock's books; providers/ never reaches up for them."""
    for path in PROVIDERS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            upward = [name for name in names if name.split(".")[0] in ("experiments", "evaluation", "leaderboards")]
            assert not upward, f"{path.relative_to(PROVIDERS.parent)}:{node.lineno} imports {upward[0]}"


def test_wrong_gives_a_plausible_patch_that_changes_nothing():
    text = generate({"mode": "wrong"}).text
    assert extract_patch(text) == no_op_rewrite(TASK["gold_patch"]) != ""
