"""The agent's tools over a dict of files, for tests of a model's side of the loop (the
mock, the fake servers): what a model reads is what the files hold."""

from __future__ import annotations

import subprocess

from providers.types import ToolCall, ToolResult

ALL_TOOLS = ("list_files", "read_file", "search", "replace", "write_file", "run_tests", "submit")


class Files:
    """The agent's tools over a dict of files; reads numbered as ``numbering`` says, after a
    ``header``, and cut at ``cap`` characters."""

    def __init__(self, files: dict[str, str], cap: int = 100_000, numbering: str = "{number:>6}\t{line}", header=""):
        self.files = dict(files)
        self.cap = cap
        self.numbering = numbering
        self.header = header
        self.submitted = False
        self.calls: list[ToolCall] = []

    def run(self, call: ToolCall) -> ToolResult:
        self.calls.append(call)
        if call.malformed:
            return ToolResult(call.id, f"Error: the arguments are not a JSON object: {call.malformed}", True)
        tool = getattr(self, f"tool_{call.name}", None)
        if tool is None:
            return ToolResult(call.id, f"Error: there is no tool {call.name}", True)
        try:
            return ToolResult(call.id, tool(**call.arguments))
        except (KeyError, ValueError) as problem:
            return ToolResult(call.id, f"Error: {problem}", True)

    def tool_list_files(self, path: str = ".") -> str:
        return "\n".join(sorted(self.files))

    def tool_read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        lines = self.files[path].splitlines()[start_line - 1 : end_line]
        text = self.header + "\n".join(
            self.numbering.format(number=number, line=line) for number, line in enumerate(lines, start=start_line)
        )
        return text if len(text) <= self.cap else text[: self.cap] + f"\n[output cut: {self.cap} characters shown]"

    def tool_replace(self, path: str, old: str, new: str) -> str:
        found = self.files[path].count(old)
        if found != 1:
            raise ValueError(f"old occurs {found} times in {path}, not once")
        self.files[path] = self.files[path].replace(old, new)
        return f"Replaced in {path}."

    def tool_write_file(self, path: str, content: str) -> str:
        self.files[path] = content
        return f"Wrote {path}."

    def tool_run_tests(self, test: str = "") -> str:
        return "3 passed"

    def tool_submit(self) -> str:
        self.submitted = True
        return "Submitted."


def patched(files: dict[str, str], patch: str, tmp_path) -> dict[str, str]:
    """The files as ``git apply`` leaves them: what the gold patch makes of them."""
    for path, content in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=tmp_path, check=True)
    return {path: (tmp_path / path).read_text() for path in files}
