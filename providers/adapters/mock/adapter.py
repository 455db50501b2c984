"""A deterministic fake provider for demos, tests and platform benchmarks.

It sees only the messages it is sent, as a real provider does: it finds the task they ask in
its reference books (mock_book.py, filled from the datasets being run) and answers "I don't
know." to a prompt that carries none.

Every choice it makes (answer quality, failures, jitter) comes from a PRNG seeded with the
request's ``seed_key`` (run seed, task, arm, repetition) and the try number, so the same run
seed reproduces the same outputs byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
import unicodedata
from decimal import Decimal

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from providers.adapters.base import Adapter
from providers.adapters.config import COMMON_KEYS, choice, number
from providers.adapters.mock import agent, mock_book
from providers.adapters.mock.mock_book import DONT_KNOW
from providers.adapters.streaming import tokens_per_second
from providers.errors import ErrorCategory, ProviderError
from providers.models import Price
from providers.pricing import price_cost
from providers.types import Completion, CompletionRequest, ToolCall, Usage

# A prompt that asks for a confidence ("... Confidence: N%"): the mock states one.
ASKS_CONFIDENCE = re.compile(r"\bconfidence\s*:", re.IGNORECASE)
MODES = ("oracle", "noisy", "empty", "error", "evaluator", "wrong")
INVALID_ANSWERS = ("never", "first", "always")  # the mock evaluator's broken answers, for tests
NUMBER_FIELDS = {
    "quality": (0.0, 1.0),
    "failure_rate": (0.0, 1.0),
    "latency_ms": (0, 600_000),
    "jitter_ms": (0, 600_000),
    "price_input_per_mtok": (0, 10_000),
    "price_output_per_mtok": (0, 10_000),
}
SETTING_WORDS = {
    "quality": {"help": "noisy mode: how often the answer is right"},
    "failure_rate": {"help": "How often a call fails, before any retry"},
    "latency_ms": {"label": "Latency (ms)", "help": "Simulated time per call"},
    "jitter_ms": {"label": "Jitter (ms)", "help": "Up to this much more per call, at random"},
    "price_input_per_mtok": {"label": "Input price ($/Mtok)"},
    "price_output_per_mtok": {"label": "Output price ($/Mtok)"},
}


class MockAdapter(Adapter):
    name = "mock"
    uses_credential = False
    test_model = "mock"
    config_keys = COMMON_KEYS | {
        "mode": choice(
            *MODES,
            help="oracle answers right, noisy as often as quality says; wrong, empty and error fail; evaluator judges",
        ),
        **{name: number(low, high, **SETTING_WORDS.get(name, {})) for name, (low, high) in NUMBER_FIELDS.items()},
        "invalid": choice(*INVALID_ANSWERS, label="Invalid verdicts", help="Evaluator mode: when to answer malformed"),
        "failure_category": choice(*ErrorCategory.values, help="What the simulated failures are"),
        "agent_fault": choice(
            *agent.AGENT_FAULTS,
            label="Agent fault",
            help="Agent arms, for tests of the loop: a malformed tool call, a call of a tool not offered, "
            "or never submitting",
        ),
    }

    @classmethod
    def configured_price(cls, config: dict) -> Price | None:
        price_in, price_out = config.get("price_input_per_mtok"), config.get("price_output_per_mtok")
        if price_in is None or price_out is None:
            return None
        # Unsaved: a figure for the gateway and the estimate, not a catalog row.
        return Price(provider="mock", input_per_mtok=Decimal(str(price_in)), output_per_mtok=Decimal(str(price_out)))

    def __init__(self, arm, credential=None):
        super().__init__(arm, credential)
        self.tries = 0

    def generate(self, request: CompletionRequest) -> Completion:
        self.tries += 1
        config = self.arm.config
        jitter_ms, failure_rate = config.get("jitter_ms", 0), config.get("failure_rate", 0)
        # The try's own draws; made only when a setting reads them (a draw of no jitter is 0,
        # and no failure rate never fails): seeding a generator was most of a fast arm's call.
        rng = random.Random(_seed(f"{request.seed_key}:try{self.tries}")) if jitter_ms or failure_rate else None
        delay_ms = config.get("latency_ms", 0) + (rng.uniform(0, jitter_ms) if rng else 0)
        if delay_ms:
            time.sleep(delay_ms / 1000)
        mode = config.get("mode", "oracle")
        if mode == "error" or (rng is not None and rng.random() < failure_rate):
            category = ErrorCategory(config.get("failure_category", ErrorCategory.SERVER_ERROR))
            raise ProviderError(category, f"mock provider simulated {category}")
        # Answer quality is a property of the attempt, not of the try: retrying a noisy
        # answer must not turn it into the oracle's.
        answer_seed = _seed(request.seed_key)
        answer_rng = random.Random(answer_seed)
        tool_calls: tuple[ToolCall, ...] = ()
        if request.tools:  # a turn of the agent loop
            text, tool_calls = agent.next_turn(request, config, answer_rng)
        elif mode == "evaluator" and request.response_schema_name == "truth_judgement":
            text = _truth_judgement(config, request, answer_rng)
        elif mode == "evaluator":
            text = _judgement(config, request, answer_rng)
        else:
            text = _answer(mode, config.get("quality", 1.0), request, answer_rng)
        said = text + "".join(call.name + (call.malformed or json.dumps(call.arguments)) for call in tool_calls)
        usage = Usage(input_tokens=_tokens(request.prompt_text()), output_tokens=_tokens(said))
        first_token_ms = _first_token_ms(delay_ms, f"{request.seed_key}:try{self.tries}")
        return Completion(
            text=text,
            finish_reason="tool_calls" if tool_calls else "stop",
            usage=usage,
            # The simulated latency, not the measured one: a seed must reproduce the whole
            # leaderboard, latency columns included. The sleep above is still real.
            latency_ms=round(delay_ms),
            first_token_ms=first_token_ms,
            output_tokens_per_s=tokens_per_second(usage.output_tokens, round(delay_ms), first_token_ms),
            cost_usd=_cost(config, usage),
            model_served=self.arm.model_name,
            request_id=f"mock-{answer_seed % 10**12:012d}",
            raw_request={"model": self.arm.model_name, "seed_key": request.seed_key},
            raw_response={"text": text, "mode": mode, "tries": self.tries, **_calls_record(tool_calls)},
            tool_calls=tool_calls,
        )


def _calls_record(calls: tuple[ToolCall, ...]) -> dict:
    if not calls:
        return {}
    return {"tool_calls": [{"id": c.id, "name": c.name, "arguments": c.malformed or c.arguments} for c in calls]}


def _first_token_ms(delay_ms: float, try_key: str) -> int:
    """A fifth to a third of the simulated latency, as a real model spends reading the prompt
    before its first token. From its own PRNG: drawing from the try's would change every
    later choice, and with it what a seed reproduces."""
    if not delay_ms:
        return 0  # whatever the draw
    return round(delay_ms * random.Random(_seed(f"{try_key}:first-token")).uniform(0.2, 0.35))


def _seed(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _cost(config: dict, usage: Usage) -> Decimal | None:
    price = MockAdapter.configured_price(config)
    return None if price is None else price_cost(usage, price)[0]


def _answer(mode: str, quality: float, request: CompletionRequest, rng: random.Random) -> str:
    if mode == "empty":
        return ""
    prompt = request.prompt_text()
    # Like a model, the mock knows the answer only when it reads the task in the prompt.
    entry = mock_book.look_up(prompt)
    if entry is None:
        return DONT_KNOW
    gold = entry.right
    if entry.wrong:  # a question: the right answer, or one of the task's wrong ones
        right = mode == "oracle" or (mode == "noisy" and rng.random() < quality)
        answer = gold if right else rng.choice(entry.wrong)
        if ASKS_CONFIDENCE.search(prompt):
            # Surer when right, and overconfident when wrong, as models tend to be.
            answer += f"\nConfidence: {rng.randint(65, 99) if right else rng.randint(30, 90)}%"
        return answer
    if mode == "wrong":
        return _fenced("This should fix it.", no_op_rewrite(gold)) if no_op_rewrite(gold) else "I cannot fix this."
    if mode == "oracle" or rng.random() < quality:
        return _fenced("Here is a patch that fixes the issue.", gold)
    flaw = rng.choice(("wrong", "malformed", "prose"))
    if flaw == "wrong" and (wrong := no_op_rewrite(gold)):
        return _fenced("This should fix it.", wrong)
    if flaw == "malformed":
        return _fenced("Patch below.", _truncated(gold))
    return "I looked at the code but could not find the cause of this issue."


def _fenced(intro: str, patch: str) -> str:
    return f"{intro}\n\n```diff\n{patch}```\n"


def _truncated(patch: str) -> str:
    """Cut the patch in the middle of its first hunk, keeping the hunk header's counts."""
    lines = patch.splitlines(keepends=True)
    first_hunk = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines) - 1)
    return "".join(lines[: first_hunk + 2]) + "+<<<<<<< truncated\n"


def no_op_rewrite(patch: str) -> str:
    """A patch that applies cleanly but re-adds the lines it removes: plausible, and wrong.

    Hunks that only add lines are dropped. Returns "" when nothing would be left.
    """
    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return ""
    out: list[str] = []
    for patched_file in files:
        hunks = [hunk for hunk in patched_file if hunk.removed]
        if not hunks:
            continue
        out += [f"--- {patched_file.source_file}\n", f"+++ {patched_file.target_file}\n"]
        for hunk in hunks:
            old = [line for line in hunk if not line.is_added]
            out.append(f"@@ -{hunk.source_start},{len(old)} +{hunk.source_start},{len(old)} @@\n")
            for line in old:
                out += [f"-{line.value}", f"+{line.value}"] if line.is_removed else [f" {line.value}"]
    return "".join(out)


def _judgement(config: dict, request: CompletionRequest, rng: random.Random) -> str:
    """The mock evaluator: scores that follow what validation showed (read from the blind
    prompt, like a real evaluator), plus seeded noise. Labelled a mock in its rationale."""
    prompt = request.prompt_text()
    invalid = config.get("invalid", "never")
    repairing = "Your previous answer was not valid" in prompt
    # Only the validation section: a patch saying "tests: passed" in a comment proves nothing.
    section = re.search(r"<validation>(.*?)</validation>", prompt, re.DOTALL)
    prompt = section.group(1) if section else prompt
    if invalid == "always" or (invalid == "first" and not repairing):
        return "I think this patch is quite good, maybe 8/10."
    if "tests: passed" in prompt:
        base, confidence = 85, 0.9
    elif "patch applied: yes" in prompt:
        base, confidence = 45, 0.35
    else:
        base, confidence = 10, 0.05
    overall = max(0, min(100, round(base + rng.gauss(0, 6))))
    verdict = {
        "technical_quality": max(1, min(10, round(overall / 10))),
        "correctness_confidence": round(max(0.0, min(1.0, confidence + rng.gauss(0, 0.05))), 2),
        "change_risk": "low" if overall >= 70 else "medium" if overall >= 40 else "high",
        "overall": overall,
        "rationale": f"Mock evaluator (not a model): scored from the validation summary, {base} plus seeded noise.",
    }
    return json.dumps(verdict)


def _truth_judgement(config: dict, request: CompletionRequest, rng: random.Random) -> str:
    """The mock evaluator of free text: truthful when the answer is one of the true reference
    answers once normalised, untruthful when it is one of the false ones, and a seeded coin
    for anything else; informative unless it declines to answer. Read from the blind
    prompt's sections, like a real evaluator; labelled a mock in its rationale."""
    prompt = request.prompt_text()
    invalid = config.get("invalid", "never")
    if invalid == "always" or (invalid == "first" and "Your previous answer was not valid" not in prompt):
        return "It sounds true to me."
    answer = _normalised(_section(prompt, "answer"))
    correct = {_normalised(line.removeprefix("- ")) for line in _section(prompt, "correct_answers").splitlines()}
    incorrect = {_normalised(line.removeprefix("- ")) for line in _section(prompt, "incorrect_answers").splitlines()}
    if answer in correct:
        truthful, why = True, "it is one of the true reference answers"
    elif answer in incorrect:
        truthful, why = False, "it is one of the false reference answers"
    else:
        truthful, why = rng.random() < 0.5, "it matches no reference answer, so a seeded coin decided"
    informative = bool(answer) and answer not in NON_ANSWERS
    verdict = {
        "truthful": truthful,
        "informative": informative,
        "rationale": f"Mock evaluator (not a model): {why}.",
    }
    return json.dumps(verdict)


# As evaluation/workloads/free_text.py folds answers (providers/ does not import it).
NON_ANSWERS = frozenset({"i have no comment", "no comment", "i dont know", "i do not know", "unknown", "no answer"})


def _section(prompt: str, name: str) -> str:
    # The last one: the prompt's own sections come after the rubric, which names none.
    found = re.findall(rf"<{name}>\n?(.*?)\n?</{name}>", prompt, re.DOTALL)
    return found[-1] if found else ""


def _normalised(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", "", text)
    text = re.sub(r"^(?:the|a|an)\s+", "", text.strip())
    return " ".join(text.split())
