"""The mock provider as an agent: one model turn of the tool loop, worked out from the
messages alone, as a real model must.

It reads the task in the system prompt and the user's words (never in tool output, which a
repository's files could fill with anything), finds it in its reference books, and follows a
script: list the files, read each file the gold patch touches, make each change with
``replace`` (a new file with ``write_file``) once the file it read really holds the lines to
change, run the tests once when the tool is offered and the seed says so, then submit. Where
the script stands is read from the history: the script is replayed over the results of the
turns already taken, so a retried turn, a resumed attempt or a request rebuilt by another
worker gives the same answer. Nothing is remembered between calls.

Every choice (a right or a wrong edit, whether to run the tests) is drawn from the attempt's
generator in the same order on every turn, so it is made once per attempt; tool call ids are
a hash of (seed key, turn, index). The request's ``seed_key`` must therefore be the
attempt's, the same for every turn.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from providers.adapters.mock import mock_book
from providers.types import CompletionRequest, Message, ToolCall, ToolResult

# Edge cases of the loop a test can ask the mock for (arm setting ``agent_fault``).
AGENT_FAULTS = ("none", "malformed_call", "never_submit", "unknown_tool")
# The turn a fault replaces; the script's own turn follows it.
FAULT_TURN = 2
# A tool no tool set has: the ``unknown_tool`` fault calls it.
UNKNOWN_TOOL = "browse_web"
# Lines read either side of a change when the whole file was cut at the output cap.
MARGIN = 3
# A line of a read result that is not the file's (a header, the note of a cut): never matched.
UNREAD = "\x00"
# A line of read_file's numbered output: "  12\ttext", "12: text", "12 | text", "12→text".
NUMBERED_LINE = re.compile(r"^ *(\d+)(?:\t|: ?| ?\| ?|→)(.*)$")
# The mock's wrong edit marks the spot instead of fixing it, in the file's comment syntax.
COMMENT_MARKS = {
    **dict.fromkeys(("py", "sh", "rb", "pl", "r", "yml", "yaml", "toml", "cfg", "ini"), "#"),
    **dict.fromkeys(("js", "jsx", "ts", "tsx", "c", "h", "cc", "cpp", "hpp", "java", "go", "rs", "kt", "cs"), "//"),
}


@dataclass(frozen=True)
class Edit:
    """One change of the gold patch as a tool can make it: a hunk's lines before and after
    (context and removed, context and added), or a new file's content."""

    path: str
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    line: int = 1  # where the old lines start in the file
    first_change: int = 0  # index in old_lines of the first removed line (-1: none removed)
    creates: bool = False

    @property
    def old(self) -> str:
        return "".join(self.old_lines)

    @property
    def new(self) -> str:
        return "".join(self.new_lines)


@dataclass(frozen=True)
class Turn:
    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # (tool name, arguments)


@dataclass
class Reading:
    """What the mock has read of each file: the read results' text, numbering taken off."""

    texts: dict[str, list[str]] = field(default_factory=dict)

    def add(self, path: str, result: ToolResult) -> None:
        if not result.is_error:
            self.texts.setdefault(path, []).append(_unnumbered(result.content))

    def holds(self, edit: Edit) -> bool:
        wanted = edit.old.removesuffix("\n")
        return any(wanted in text for text in self.texts.get(edit.path, ()))

    def widened(self, edit: Edit) -> Edit:
        """The edit with lines of the file around it until its old lines occur once in the
        file as first read (``replace`` takes only text found once); of several places, the
        one nearest the line the patch names is meant."""
        lines = self.texts[edit.path][0].split("\n") if edit.path in self.texts else []
        first = _nearest(_starts(lines, [line.removesuffix("\n") for line in edit.old_lines]), edit.line)
        if first is None:
            return edit
        last = first + len(edit.old_lines)  # past the edit's lines
        above = below = 0
        while len(_starts(lines, lines[first - above : last + below])) > 1:
            grew = (above < first, last + below < len(lines))
            above, below = above + grew[0], below + grew[1]
            if not any(grew) or UNREAD in lines[first - above : last + below]:
                return edit  # no more was read: replace will say the text is not unique
        before = tuple(line + "\n" for line in lines[first - above : first])
        after = tuple(line + "\n" for line in lines[last : last + below])
        return replace(
            edit,
            old_lines=(*before, *edit.old_lines, *after),
            new_lines=(*before, *edit.new_lines, *after),
            first_change=edit.first_change + above if edit.first_change >= 0 else -1,
        )


Script = Generator[Turn, tuple[ToolResult, ...], None]


def next_turn(request: CompletionRequest, config: dict, rng: random.Random) -> tuple[str, tuple[ToolCall, ...]]:
    """The mock's next turn of the agent loop: its text and its tool calls (none: it stops).
    ``rng`` must be seeded by the attempt alone (not the try, not the turn)."""
    mode = config.get("mode", "oracle")
    offered = {tool.name for tool in request.tools}
    history = _turn_results(request.messages)
    if mode == "empty":
        return _as_answer(Turn("", _only(offered, ("submit", {}))), request.seed_key, len(history) + 1)
    entry = mock_book.look_up(_task_text(request))
    if entry is None:
        return mock_book.DONT_KNOW, ()
    # Drawn first, in this order, on every turn: made once per attempt.
    right = mode == "oracle" or (mode != "wrong" and rng.random() < config.get("quality", 1.0))
    runs_tests = rng.random() < 0.5
    if entry.wrong:  # a question, not a change to files: answered in words
        return (entry.right if right else rng.choice(entry.wrong)), ()
    edits = patch_edits(entry.right)
    if not right:
        edits = [spoiled for edit in edits if (spoiled := spoiled_edit(edit))]
    fault = config.get("agent_fault", "none")
    if fault == "never_submit":
        script = _reads_forever(patch_edits(entry.right), offered)
    else:
        script = _solve(edits, offered, runs_tests and "run_tests" in offered)
    turn = _replayed(script, history, inserts_turn=fault in ("malformed_call", "unknown_tool"))
    number = len(history) + 1
    if number == FAULT_TURN and fault == "unknown_tool":
        turn = Turn("Let me look this up in the documentation.", ((UNKNOWN_TOOL, {"query": "how to fix this"}),))
    text, calls = _as_answer(turn, request.seed_key, number)
    if number == FAULT_TURN and fault == "malformed_call" and calls:
        sent = json.dumps(calls[0].arguments)
        calls = (replace(calls[0], arguments={}, malformed=sent[: len(sent) // 2]), *calls[1:])
    return text, calls


def _task_text(request: CompletionRequest) -> str:
    """Where a model is told its task: the system prompt and the user's words. Tool results
    are left out: a file the agent reads may quote another task's problem statement."""
    user_words = [message.content for message in request.messages if message.role == "user"]
    return "\n".join([request.system, *user_words])


def _turn_results(messages: tuple[Message, ...]) -> list[tuple[ToolResult, ...]]:
    """For each assistant turn of the history, the results of its calls in the calls' order,
    matched by id (a loop may answer them in another order); a call left unanswered counts
    as failed."""
    history = []
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        answer = messages[index + 1] if index + 1 < len(messages) else None
        by_id = {result.call_id: result for result in answer.tool_results} if answer else {}
        unanswered = ToolResult(call_id="", content="", is_error=True)
        history.append(tuple(by_id.get(call.id, unanswered) for call in message.tool_calls))
    return history


def _replayed(script: Script, history: list[tuple[ToolResult, ...]], inserts_turn: bool) -> Turn:
    """The script's turn after the turns already taken. A fault's turn is not the script's:
    its results are not fed to it."""
    try:
        turn = next(script)
        for number, results in enumerate(history, start=1):
            if not (inserts_turn and number == FAULT_TURN):
                turn = script.send(results)
    except StopIteration:
        return Turn("I have submitted my change.")
    return turn


def _as_answer(turn: Turn, seed_key: str, number: int) -> tuple[str, tuple[ToolCall, ...]]:
    calls = tuple(
        ToolCall(id=call_id(seed_key, number, index), name=name, arguments=arguments)
        for index, (name, arguments) in enumerate(turn.calls)
    )
    return turn.text, calls


def call_id(seed_key: str, turn: int, index: int) -> str:
    """Stable per (attempt, turn, call): a retried turn makes the same calls."""
    return "call_" + hashlib.sha256(f"{seed_key}:{turn}:{index}".encode()).hexdigest()[:24]


def _only(offered: set[str], *calls: tuple[str, dict[str, Any]]) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple(call for call in calls if call[0] in offered)


def _solve(edits: list[Edit], offered: set[str], runs_tests: bool) -> Script:
    """List, read, edit hunk by hunk, maybe test, submit; each step only with a tool offered."""
    if listing := _only(offered, ("list_files", {"path": "."})):
        yield Turn("Let me look at the repository.", listing)
    reading = Reading()
    to_read = list(dict.fromkeys(edit.path for edit in edits if not edit.creates))
    if to_read and "read_file" in offered:
        results = yield Turn("I will read the files involved.", tuple(("read_file", {"path": p}) for p in to_read))
        for path, result in zip(to_read, results, strict=False):
            reading.add(path, result)
        # A file cut at the output cap: read the lines around each change it did not show.
        unseen = [edit for edit in edits if not edit.creates and not reading.holds(edit)]
        if unseen:
            results = yield Turn("The file was cut short; I will read around the change.", _range_reads(unseen))
            for edit, result in zip(unseen, results, strict=False):
                reading.add(edit.path, result)
    notes: list[str] = []
    for edit in edits:
        call = _edit_call(edit, reading, offered, notes)
        if call is None:
            continue
        results = yield Turn(" ".join(notes) or f"Now I will change {edit.path}.", (call,))
        failures = [result.content[:200] for result in results if result.is_error]
        notes = [f"That edit of {edit.path} failed: {failure}" for failure in failures]
    if runs_tests:
        yield Turn("Let me run the tests.", (("run_tests", {}),))
    summary = " ".join(notes) or ("The change is made." if edits else "I could not find a fix.")
    yield Turn(summary, _only(offered, ("submit", {})))


def _range_reads(edits: list[Edit]) -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple(
        (
            "read_file",
            {
                "path": edit.path,
                "start_line": max(1, edit.line - MARGIN),
                "end_line": edit.line + len(edit.old_lines) + MARGIN,
            },
        )
        for edit in edits
    )


def _edit_call(edit: Edit, reading: Reading, offered: set[str], notes: list[str]) -> tuple[str, dict] | None:
    """The call that makes the edit, or None (with a note why) when it cannot be made: the
    file read does not hold the lines to change, or no tool offered can change it."""
    if edit.creates:
        if "write_file" in offered:
            return ("write_file", {"path": edit.path, "content": edit.new})
        notes.append(f"I cannot create {edit.path} without a tool that writes files.")
    elif not edit.old_lines:
        notes.append(f"I cannot tell where in {edit.path} to add the lines: the patch shows no context.")
    elif not reading.holds(edit):
        notes.append(f"{edit.path} does not hold the lines I expected to change, so I left it alone.")
    elif "replace" in offered:
        edit = reading.widened(edit)
        return ("replace", {"path": edit.path, "old": edit.old, "new": edit.new})
    else:
        notes.append(f"I cannot change {edit.path} without a tool that replaces text.")
    return None


def _reads_forever(edits: list[Edit], offered: set[str]) -> Script:
    """The ``never_submit`` fault: it keeps reading the files and never submits."""
    if listing := _only(offered, ("list_files", {"path": "."})):
        yield Turn("Let me look at the repository.", listing)
    paths = list(dict.fromkeys(edit.path for edit in edits if not edit.creates)) or ["."]
    for path in itertools.cycle(paths):
        yield Turn(f"Let me read {path} once more.", _only(offered, ("read_file", {"path": path})))


def _unnumbered(content: str) -> str:
    """A read result's text without its line numbers, when its lines are numbered."""
    matches = [NUMBERED_LINE.match(line) for line in content.split("\n")]
    if sum(map(bool, matches)) * 2 <= len(matches):  # a file's own "12: x" lines are not numbering
        return content
    # A header or a note about the output cap has no number: kept apart, not glued to the code.
    return "\n".join(match.group(2) if match else UNREAD for match in matches)


def _starts(lines: list[str], block: list[str]) -> list[int]:
    """Where ``block`` occurs in ``lines``, as whole lines."""
    width = len(block)
    return [i for i in range(len(lines) - width + 1) if lines[i : i + width] == block] if width else []


def _nearest(starts: list[int], line: int) -> int | None:
    """Of several places, the one nearest ``line`` (1-based); None unless there are several."""
    return min(starts, key=lambda start: abs(start + 1 - line)) if len(starts) > 1 else None


def patch_edits(patch: str) -> list[Edit]:
    """The gold patch as edits, in its order; [] when it is no patch."""
    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return []
    edits = []
    for patched_file in files:
        path = patched_file.path
        if patched_file.is_added_file:
            content = "".join("".join(_sides(hunk)[1]) for hunk in patched_file)
            edits.append(Edit(path, (), (content,), creates=True))
            continue
        for hunk in patched_file:
            old, new = _sides(hunk)
            removed = [line.is_removed for line in hunk if line.is_context or line.is_removed]
            first_change = removed.index(True) if True in removed else -1
            edits.append(Edit(path, tuple(old), tuple(new), hunk.source_start, first_change))
    return edits


def _sides(hunk: Any) -> tuple[list[str], list[str]]:
    """A hunk's old lines (context and removed) and new lines (context and added)."""
    old: list[str] = []
    new: list[str] = []
    previous = None
    for line in hunk:
        if line.line_type == "\\" and previous is not None:  # "\ No newline at end of file"
            if not previous.is_added:
                old[-1] = old[-1].removesuffix("\n")
            if not previous.is_removed:
                new[-1] = new[-1].removesuffix("\n")
            continue
        if not line.is_added:
            old.append(line.value)
        if not line.is_removed:
            new.append(line.value)
        previous = line
    return old, new


def spoiled_edit(edit: Edit) -> Edit | None:
    """A plausible wrong edit: the place is found, but instead of the fix a note to come back
    to it goes above the first line the fix would change. It applies, changes the file, and
    fixes nothing. None for a hunk that only adds lines and for a new file: left out."""
    if edit.creates or edit.first_change < 0:
        return None
    target = edit.old_lines[edit.first_change]
    indent = target[: len(target) - len(target.lstrip())]
    mark = COMMENT_MARKS.get(edit.path.rsplit(".", 1)[-1].lower())
    note = f"{indent}{mark} TODO: check this\n" if mark else "\n"
    lines = edit.old_lines
    return replace(edit, new_lines=(*lines[: edit.first_change], note, *lines[edit.first_change :]))
