"""The fake agent servers speak what the official SDKs parse: each test drives the loop with
the SDK itself (the messages written here in the provider's documented format), so the
servers are proven against the vendors' code before our adapters meet them."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.workloads import workload_for
from experiments.mock_books import ReferenceTask, book_of
from providers.adapters.mock import mock_book
from providers.types import ToolCall
from tests.providers.agent_files import ALL_TOOLS, Files, patched
from tests.providers.agent_servers import anthropic_agent, openai_agent

TASK = read_task_dir(demo_task_dirs()[1], 1)
SYSTEM = "You fix bugs in a repository with the tools you are given, then submit."
PROMPT = f"Fix this issue.\n\n<issue>\n{TASK['problem_statement']}\n</issue>"
SCHEMA = {"type": "object", "properties": {}}


@pytest.fixture(autouse=True)
def demo_book():
    reference = ReferenceTask(TASK["external_id"], TASK["problem_statement"], {}, TASK["gold_patch"])
    mock_book.register_book("demo-wire", book_of(workload_for("pr_patch"), [reference]))


def as_call(call_id: str, name: str, arguments) -> ToolCall:
    """What a loop makes of a call it was sent: parsed, or kept as the broken text it is."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(call_id, name, parsed)
    return ToolCall(call_id, name, malformed=str(arguments))


class OpenAILoop:
    def __init__(self, fake, stream: bool, prompt: str = PROMPT):
        self.client = openai.OpenAI(base_url=fake.url + "/v1", api_key="sk-test", max_retries=0)
        self.stream = stream
        # Any: the SDK's TypedDicts, which these dicts are, as the documents write them.
        self.messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        self.tools: list[Any] = [
            {"type": "function", "function": {"name": name, "description": f"The {name} tool.", "parameters": SCHEMA}}
            for name in ALL_TOOLS
        ]
        self.fragments = 0  # argument fragments streamed

    def turn(self) -> tuple[str, list[ToolCall], str]:
        if self.stream:
            text, wire_calls, finish = self._streamed()
        else:
            response = self.client.chat.completions.create(model="gpt-4o", messages=self.messages, tools=self.tools)
            choice = response.choices[0]
            text, finish = choice.message.content or "", choice.finish_reason
            wire_calls = [
                (c.id, c.function.name, c.function.arguments)
                for c in choice.message.tool_calls or ()
                if isinstance(c, ChatCompletionMessageFunctionToolCall)
            ]
        assistant: dict = {"role": "assistant", "content": text or None}
        if wire_calls:
            assistant["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in wire_calls
            ]
        self.messages.append(assistant)
        return text, [as_call(*call) for call in wire_calls], finish

    def _streamed(self):
        stream = self.client.chat.completions.create(
            model="gpt-4o",
            messages=self.messages,
            tools=self.tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, calls, finish, usage = "", {}, "", None
        for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for fragment in choice.delta.tool_calls or ():
                    call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] += fragment.id or ""
                    call["name"] += fragment.function.name or ""
                    call["arguments"] += fragment.function.arguments or ""
                    self.fragments += bool(fragment.function.arguments)
        assert usage is not None and usage.prompt_tokens > 0
        return text, [(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())], finish

    def answer(self, results) -> None:
        self.messages += [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results]


class AnthropicLoop:
    def __init__(self, fake, stream: bool, prompt: str = PROMPT):
        self.client = anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test", max_retries=0)
        self.stream = stream
        self.messages: list[Any] = [{"role": "user", "content": prompt}]
        self.tools: list[Any] = [
            {"name": name, "description": f"The {name} tool.", "input_schema": SCHEMA} for name in ALL_TOOLS
        ]
        self.fragments = 0

    def turn(self) -> tuple[str, list[ToolCall], str]:
        asked: dict[str, Any] = {
            "model": "claude-sonnet",
            "max_tokens": 2048,
            "system": SYSTEM,
            "messages": self.messages,
        }
        if self.stream:
            text, wire_calls, finish = self._streamed(
                self.client.messages.create(**asked, tools=self.tools, stream=True)
            )
        else:
            response = self.client.messages.create(**asked, tools=self.tools)
            text = "".join(block.text for block in response.content if block.type == "text")
            wire_calls = [(b.id, b.name, b.input) for b in response.content if b.type == "tool_use"]
            finish = response.stop_reason
        calls = [as_call(*call) for call in wire_calls]
        content: list[dict] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in calls]
        self.messages.append({"role": "assistant", "content": content})
        return text, calls, finish

    def _streamed(self, events):
        text, calls, finish = "", [], ""
        for event in events:
            if event.type == "content_block_start" and event.content_block.type == "tool_use":
                calls.append([event.content_block.id, event.content_block.name, ""])
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                calls[-1][2] += event.delta.partial_json
                self.fragments += bool(event.delta.partial_json)
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
            elif event.type == "message_delta":
                finish = event.delta.stop_reason
        return text, [tuple(call) for call in calls], finish

    def answer(self, results) -> None:
        blocks = [
            {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
            for r in results
        ]
        self.messages.append({"role": "user", "content": blocks})


LOOPS = {"openai": (OpenAILoop, openai_agent), "anthropic": (AnthropicLoop, anthropic_agent)}
WIRES = [(provider, stream) for provider in LOOPS for stream in (False, True)]


def run(loop, files: Files, max_turns: int = 30) -> list[tuple[str, list[ToolCall], str]]:
    turns = []
    for _ in range(max_turns):
        text, calls, finish = loop.turn()
        turns.append((text, calls, finish))
        if not calls:
            break
        loop.answer([files.run(call) for call in calls])
        if files.submitted:
            break
    return turns


def started(fake, provider: str, stream: bool, config: dict, prompt: str = PROMPT):
    loop_class, responder = LOOPS[provider]
    fake.responder = responder(config)
    return loop_class(fake, stream, prompt)


@pytest.mark.parametrize("provider, stream", WIRES)
def test_the_sdk_drives_the_mock_agent_to_the_gold_patch(fake, provider, stream, tmp_path):
    loop = started(fake, provider, stream, {"mode": "oracle"})
    files = Files(TASK["repo_files"])
    turns = run(loop, files)
    assert files.submitted
    assert files.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)
    assert {finish for _, _, finish in turns} == {"tool_calls" if provider == "openai" else "tool_use"}
    assert all(call.name in ALL_TOOLS for _, calls, _ in turns for call in calls)
    if stream:  # arguments arrive in pieces the client must join
        assert loop.fragments > 2 * sum(len(calls) for _, calls, _ in turns)


@pytest.mark.parametrize("provider, stream", WIRES)
def test_a_malformed_call_travels_as_broken_arguments(fake, provider, stream, tmp_path):
    loop = started(fake, provider, stream, {"mode": "oracle", "agent_fault": "malformed_call"})
    files = Files(TASK["repo_files"])
    turns = run(loop, files)
    broken = turns[1][1][0]
    assert broken.malformed and broken.arguments == {}
    assert files.submitted
    assert files.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)


@pytest.mark.parametrize("provider, stream", WIRES)
def test_an_unknown_task_gets_words_and_no_call(fake, provider, stream):
    loop = started(fake, provider, stream, {"mode": "oracle"}, prompt="Please fix the flux capacitor.")
    assert run(loop, Files({})) == [("I don't know.", [], "stop" if provider == "openai" else "end_turn")]


@pytest.mark.parametrize("provider", sorted(LOOPS))
def test_the_error_mode_is_a_server_error(fake, provider):
    loop = started(fake, provider, False, {"mode": "error"})
    with pytest.raises((openai.InternalServerError, anthropic.InternalServerError)):
        loop.turn()


def test_openai_refuses_tool_messages_out_of_turn(fake):
    loop = started(fake, "openai", False, {"mode": "oracle"})
    loop.turn()
    with pytest.raises(openai.BadRequestError, match="did not have response messages"):
        loop.turn()  # the call was never answered
    loop.messages.append({"role": "tool", "tool_call_id": "call_nobody_made", "content": "ok"})
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceding message"):
        loop.turn()


def test_anthropic_refuses_tool_results_out_of_turn(fake):
    loop = started(fake, "anthropic", False, {"mode": "oracle"})
    loop.turn()
    loop.messages.append({"role": "user", "content": "go on"})
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        loop.turn()
    loop.messages[-1] = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": ""}]}
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        loop.turn()


def test_the_server_saw_what_the_sdk_sent(fake):
    """The request as the vendor documents it reached the server: the check of the fake itself."""
    loop = started(fake, "anthropic", True, {"mode": "oracle"})
    run(loop, Files(TASK["repo_files"]), max_turns=3)
    last = fake.seen[-1].body
    assert last["tools"][0] == {"name": "list_files", "description": "The list_files tool.", "input_schema": SCHEMA}
    assert last["messages"][2]["content"][0]["type"] == "tool_result"
    assert last["stream"] is True
