"""Randomised, schema-valid OpenAI chat completions through the gateway and the real pipeline.

The responses are generated from OpenAI's own OpenAPI document (CreateChatCompletionResponse,
every $ref resolved), the way an independent mock server generates them: negative counts,
empty choices, odd strings and all. Whatever comes back, no job may crash and every attempt
must end recorded, completed or failed, after exactly one provider request.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from experiments.actions import ArmSpec, do_replace_arms
from experiments.models import ATTEMPT_TERMINAL, AttemptStatus
from providers.models import ProviderCredential
from tests.conftest import work_queue
from tests.providers.fake_server import FakeProvider, Reply

# OpenAI's OpenAPI document (github.com/openai/openai-openapi, MIT), not shipped with PRBench.
# The shared/ folder lies beside the checkout, on developers' machines and in CI alike.
SHARED_SPEC = Path(__file__).resolve().parents[3] / "shared" / "specs" / "openai-openapi.yaml"
SPEC = Path(os.environ.get("OPENAI_OPENAPI_SPEC", str(SHARED_SPEC)))
ATTEMPTS_PER_RUN = 8  # 4 tasks x 2 repetitions
RUNS = 4  # examples: bounded so the test stays near 30 s
# Keys that document a schema but do not constrain it (and x-* vendor extensions).
DOCUMENTATION = {"description", "example", "examples", "deprecated", "title"}

pytestmark = pytest.mark.skipif(not SPEC.exists(), reason="the shared OpenAI OpenAPI document is not here")


@lru_cache(maxsize=1)
def response_schema() -> dict[str, Any]:
    with SPEC.open() as spec_file:
        spec = yaml.load(spec_file, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schemas = spec["components"]["schemas"]
    return _resolved(schemas["CreateChatCompletionResponse"], schemas, ())


def _resolved(node: Any, schemas: dict, seen: tuple[str, ...]) -> Any:
    """The schema with each $ref replaced by its target (this one has no cycles)."""
    if isinstance(node, list):
        return [_resolved(item, schemas, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        assert name not in seen, f"recursive schema {name}"
        target = _resolved(schemas[name], schemas, (*seen, name))
        siblings = {key: value for key, value in node.items() if key != "$ref" and key not in DOCUMENTATION}
        return {**target, **_resolved(siblings, schemas, seen)}
    return {
        key: _resolved(value, schemas, seen)
        for key, value in node.items()
        if key not in DOCUMENTATION and not key.startswith("x-")
    }


def closed(node: Any) -> Any:
    """No keys beyond those the schema names. Still every response valid, and generating
    arbitrary extra JSON under every object would take most of the test's time."""
    if isinstance(node, list):
        return [closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: closed(value) for key, value in node.items()}
    if node.get("type") == "object" and "additionalProperties" not in node:
        node["additionalProperties"] = False
    return node


def without_extras(schema: dict[str, Any]) -> dict[str, Any]:
    """Left out (all optional in the schema, none read by the adapter): log probabilities,
    moderation results, tool calls, audio and annotations. Generating them took seconds an
    answer; everything the gateway reads (id, model, choices, finish_reason, message text
    and refusal, usage and its details) stays as random as the schema allows."""
    narrowed = copy.deepcopy(schema)
    narrowed["properties"].pop("moderation")
    choice = narrowed["properties"]["choices"]["items"]
    choice["properties"]["logprobs"] = {"type": "null"}
    for name in ("tool_calls", "function_call", "audio", "annotations"):
        choice["properties"]["message"]["properties"].pop(name)
    return closed(narrowed)


def answered(schema: dict[str, Any]) -> dict[str, Any]:
    """Narrowed to responses with a choice and usage: still every one valid, but each
    reaches the recording of an answer rather than stopping at "no choices"."""
    narrowed = copy.deepcopy(schema)
    narrowed["required"] = [*narrowed["required"], "usage"]
    narrowed["properties"]["choices"]["minItems"] = 1
    return narrowed


def responses() -> st.SearchStrategy[list[Any]]:
    schema = without_extras(response_schema())
    one = st.one_of(from_schema(schema), from_schema(answered(schema)))
    return st.lists(one, min_size=ATTEMPTS_PER_RUN, max_size=ATTEMPTS_PER_RUN)


@pytest.fixture
def openai_server(org):
    server = FakeProvider()
    credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1")
    credential.set_api_key("sk-test-fuzz-00000000")
    credential.save()
    yield server
    server.close()


def test_random_schema_valid_answers_never_wedge_a_run(experiment, openai_server, start):
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0})])
    experiment.sample_size, experiment.repetitions = 4, 2
    experiment.save()
    outcomes: Counter[tuple[str, str]] = Counter()

    @settings(
        max_examples=RUNS,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(bodies=responses())
    def run_one(bodies: list[dict]) -> None:
        openai_server.seen.clear()
        openai_server.script(*(Reply(200, body) for body in bodies))
        run = start(experiment, inference_only=True)
        work_queue()  # a job that raised would leave attempts queued or running
        attempts = list(run.attempts.values_list("status", "error_category"))
        assert len(attempts) == ATTEMPTS_PER_RUN
        assert {status for status, _ in attempts} <= {AttemptStatus.COMPLETED, AttemptStatus.FAILED}
        assert all(status in ATTEMPT_TERMINAL for status, _ in attempts)
        assert len(openai_server.seen) == ATTEMPTS_PER_RUN  # each paid for once, never again
        outcomes.update(attempts)

    run_one()
    assert sum(outcomes.values()) >= ATTEMPTS_PER_RUN
    print(f"outcomes of {sum(outcomes.values())} random answers: {dict(outcomes)}")
