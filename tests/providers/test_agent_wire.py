"""Our adapters speak each provider's tool-call wire: the gateway drives the mock agent behind a
fake server written from the providers' documents (agent_servers.py), streamed and not, to a
submitted fix; the history each turn sends is what the document says; a malformed call comes
back as one; and a key the model writes into a call never leaves the gateway."""

from __future__ import annotations

import pytest

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.workloads import workload_for
from experiments.mock_books import ReferenceTask, book_of
from providers import gateway
from providers.adapters.mock import mock_book
from providers.models import ProviderCredential
from providers.types import ArmSpec, CompletionRequest, Message, Tool, ToolCall
from tests.providers.agent_files import ALL_TOOLS, Files, patched
from tests.providers.agent_servers import anthropic_agent, openai_agent

TASK = read_task_dir(demo_task_dirs()[1], 1)
SYSTEM = "You fix bugs in a repository with the tools you are given, then submit."
PROMPT = f"Fix this issue.\n\n<issue>\n{TASK['problem_statement']}\n</issue>"
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = tuple(Tool(name, f"The {name} tool.", SCHEMA) for name in ALL_TOOLS)
SEED = "7:task:agent:0"
KEY = "sk-agent-wire-secret-0000"
# provider -> model, the credential's base URL suffix, api-version, deployments, the server
PROVIDERS = {
    "openai": ("gpt-4o", "/v1", "", {}, openai_agent),
    "openrouter": ("openai/gpt-4o", "/v1", "", {}, openai_agent),
    "openai_compatible": ("llama3", "/v1", "", {}, openai_agent),
    "azure_openai": ("gpt-4o", "", "2024-10-21", {"gpt-4o": "prod-4o"}, openai_agent),
    "anthropic": ("claude-sonnet-4-5", "", "", {}, anthropic_agent),
}


@pytest.fixture(autouse=True)
def demo_book():
    reference = ReferenceTask(TASK["external_id"], TASK["problem_statement"], {}, TASK["gold_patch"])
    mock_book.register_book("agent-wire", book_of(workload_for("pr_patch"), [reference]))
    yield
    mock_book.forget_books()


def prepared_arm(org, provider: str, fake, stream: bool) -> gateway.PreparedArm:
    model, suffix, api_version, deployments, _ = PROVIDERS[provider]
    credential = ProviderCredential(
        org=org, provider=provider, base_url=fake.url + suffix, api_version=api_version, deployments=deployments
    )
    credential.set_api_key(KEY)
    credential.save()
    config = {"max_retries": 0, "stream": stream, "solver": "agent"}
    return gateway.prepare(org.pk, ArmSpec(provider, model, config, key=f"wire-{provider}"))


def drive(prepared: gateway.PreparedArm, files: Files, turns: int = 12) -> list:
    """The agent loop as experiments/agent.py runs it, over the in-test tools."""
    history = [Message("user", PROMPT)]
    answers = []
    for _ in range(turns):
        request = CompletionRequest(messages=tuple(history), system=SYSTEM, tools=TOOLS, seed_key=SEED)
        answer = gateway.call(prepared, request)
        answers.append(answer)
        history.append(Message("assistant", answer.text, tool_calls=answer.tool_calls))
        if not answer.tool_calls:
            break
        results = tuple(files.run(call) for call in answer.tool_calls)
        if files.submitted:
            break
        history.append(Message("user", "", tool_results=results))
    return answers


@pytest.mark.django_db
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_each_wire_drives_the_agent_to_the_fix(org, fake, provider, stream, tmp_path):
    fake.responder = PROVIDERS[provider][4]({"mode": "oracle"}, seed_key=SEED)
    files = Files(TASK["repo_files"])
    answers = drive(prepared_arm(org, provider, fake, stream), files)
    assert files.submitted, [answer.text for answer in answers]
    assert files.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)
    names = [call.name for answer in answers for call in answer.tool_calls]
    assert names[0] == "list_files" and "replace" in names and names[-1] == "submit"
    assert all(answer.finish_reason in ("tool_calls", "tool_use") for answer in answers)
    assert answers[0].usage.input_tokens > 0
    # What the last request carried, as the provider documents it.
    body = fake.seen[-1].body
    if provider == "anthropic":
        assert [tool["name"] for tool in body["tools"]] == list(ALL_TOOLS)
        assert body["tools"][0]["input_schema"] == SCHEMA
        assistant = body["messages"][1]
        assert assistant["role"] == "assistant"
        assert any(block["type"] == "tool_use" for block in assistant["content"])
        results = body["messages"][2]["content"]
        assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == assistant["content"][-1]["id"]
    else:
        assert body["tools"][0] == {
            "type": "function",
            "function": {"name": "list_files", "description": "The list_files tool.", "parameters": SCHEMA},
        }
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        call = assistant["tool_calls"][0]
        assert call["type"] == "function" and isinstance(call["function"]["arguments"], str)
        tool = next(m for m in body["messages"] if m["role"] == "tool")
        assert tool["tool_call_id"] == call["id"]


@pytest.mark.django_db
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_malformed_call_arrives_as_one(org, fake, provider, stream):
    fake.responder = PROVIDERS[provider][4]({"mode": "oracle", "agent_fault": "malformed_call"}, seed_key=SEED)
    files = Files(TASK["repo_files"])
    answers = drive(prepared_arm(org, provider, fake, stream), files)
    broken = [call for answer in answers for call in answer.tool_calls if call.malformed]
    assert len(broken) == 1 and broken[0].arguments == {}
    assert files.submitted  # shown the error, the model went on


@pytest.mark.django_db
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_credentials_key_written_into_a_call_never_leaves_the_gateway(org, fake, provider):
    """A call's arguments are the model's answer: the credential's key goes from them, and
    nothing else does (a fake key in a test fixture is the model's to write)."""
    from tests.providers.fake_server import Reply

    arguments = {"path": "config.py", "content": f"API_KEY = '{KEY}'\nFIXTURE = 'sk-test-fixture-1234567890'\n"}
    if provider == "anthropic":
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": arguments}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    else:
        import json

        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "write_file", "arguments": json.dumps(arguments)},
        }
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    fake.default = Reply(200, body)
    answer = gateway.call(
        prepared_arm(org, provider, fake, stream=False), CompletionRequest((Message("user", "hi"),), tools=TOOLS)
    )
    (call,) = answer.tool_calls
    assert call.name == "write_file" and KEY not in call.arguments["content"]
    assert "sk-test-fixture-1234567890" in call.arguments["content"]
    assert isinstance(call, ToolCall)
