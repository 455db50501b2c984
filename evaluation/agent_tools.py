"""The tools an agent calls, on a working copy of its task, and the diff it leaves.

The file tools run in this process (a call costs microseconds, not a process), as root, on a
tree the sandbox user owns and whose tests that user runs: so every path is walked one
component at a time from a descriptor of the working copy, never following a link
(``O_NOFOLLOW``), and only regular files with a single link are read or written. A test can
plant a link to ``/etc/shadow`` or a hard link to a file of the worker's; neither is followed.
The tests run in the workspace's one sandbox session (evaluation/sandbox.py), with the limits
of validation.

What the model gets wrong (an unknown tool, a broken call, a missing file, a replace that does
not match) is an error outcome it reads and can correct; only the sandbox failing raises
(SandboxFailed). ``Workspace.diff`` is the answer: every file changed through the tools,
against what it held before the first change, validated later on a fresh copy.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import re
import stat
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.patches import PatchRejected, check_not_compiled, check_relative_path
from evaluation.sandbox import CHECKOUT_MARK, Box, sandbox_session
from evaluation.validation import TestPlan, run_tests
from providers.types import Tool, ToolCall

# Larger files are neither read nor searched: a model reads source, and a data file of
# gigabytes read into the worker's memory on request would be the model's way to sink it.
MAX_FILE_BYTES = 2 * 1024**2
SEARCH_LINE_CHARS = 300  # of each matching line shown (a minified file's one line is huge)
SKIPPED_DIRECTORIES = frozenset({".git", "__pycache__"})
# Options of the test runners a task's command may hold whose value follows as the next
# argument (a path, for some): that value is never taken for the command's test selection.
VALUE_OPTIONS = frozenset({"-c", "-k", "-m", "-o", "-p", "-W"})
NEW_FILE_MODE = 0o644
NO_SLOT: AbstractContextManager[Any] = contextlib.nullcontext()
OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted by the tests must not hang the worker on open.
OPEN_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call gave back, as the model will see it (capped), and how long it took."""

    content: str
    is_error: bool = False
    submitted: bool = False
    truncated: bool = False
    ms: int = 0


class ToolError(Exception):
    """The model's mistake, shown to it as the call's result."""


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str  # a JSON schema type: "string", "integer" or "boolean"
    description: str
    required: bool = True

    def schema(self) -> dict[str, str]:
        return {"type": self.type, "description": self.description}


PATH_NOTE = "relative to the repository's root"
TOOLS: dict[str, tuple[str, tuple[Parameter, ...]]] = {
    "list_files": (
        "List the files under a directory of the repository, recursively, one path per line.",
        (Parameter("path", "string", f"A directory, {PATH_NOTE}; default '.'", required=False),),
    ),
    "read_file": (
        "Read a text file, each line prefixed by its number and a tab; optionally only lines "
        "start_line to end_line (1-based, inclusive).",
        (
            Parameter("path", "string", f"The file, {PATH_NOTE}"),
            Parameter("start_line", "integer", "The first line to show (default 1)", required=False),
            Parameter("end_line", "integer", "The last line to show (default: the last)", required=False),
        ),
    ),
    "search": (
        "Find the lines containing a text in the files under a path, as 'file:line: text'.",
        (
            Parameter("pattern", "string", "The text to find (a Python regular expression when regex is true)"),
            Parameter("path", "string", f"A directory or file, {PATH_NOTE}; default '.'", required=False),
            Parameter("regex", "boolean", "Whether pattern is a regular expression (default false)", required=False),
        ),
    ),
    "replace": (
        "Replace a text in a file by another. The old text must occur exactly once in the file: "
        "include enough surrounding lines to make it unique.",
        (
            Parameter("path", "string", f"The file, {PATH_NOTE}"),
            Parameter("old", "string", "The exact text to replace, whitespace included"),
            Parameter("new", "string", "The text to put in its place"),
        ),
    ),
    "write_file": (
        "Write a whole file (created with its directories if missing, replaced if present).",
        (
            Parameter("path", "string", f"The file, {PATH_NOTE}"),
            Parameter("content", "string", "The file's whole new content"),
        ),
    ),
    "run_tests": (
        "Run the task's test command, or only one test file or pytest node id "
        "('tests/test_x.py::test_y'), and show its exit status and output.",
        (Parameter("test", "string", "One test file or node id (default: the whole command)", required=False),),
    ),
    "submit": (
        "Submit the changes made so far as the answer. Nothing can be changed afterwards.",
        (),
    ),
}
TOOL_SETS: dict[str, tuple[str, ...]] = {
    "all": tuple(TOOLS),
    "no_tests": tuple(name for name in TOOLS if name != "run_tests"),
}


def tool_specs(tool_set: str, output_cap: int) -> tuple[Tool, ...]:
    """The tools of ``tool_set`` as sent to the model, each saying how much of its output it sees."""
    return tuple(_spec(name, output_cap) for name in TOOL_SETS[tool_set])


def _spec(name: str, output_cap: int) -> Tool:
    description, parameters = TOOLS[name]
    if name == "run_tests":
        description += f" Only the last {output_cap} characters of the output are shown."
    elif name != "submit":
        description += f" Output past {output_cap} characters is cut, and says so."
    schema = {
        "type": "object",
        "properties": {parameter.name: parameter.schema() for parameter in parameters},
        "required": [parameter.name for parameter in parameters if parameter.required],
        "additionalProperties": False,
    }
    return Tool(name=name, description=description, parameters=schema)


@dataclass(frozen=True)
class Original:
    """A file as it was before the tools first changed it (``content`` None: it did not exist)."""

    content: bytes | None
    mode: int = NEW_FILE_MODE


class Workspace:
    """A working copy the tools act on, and the sandbox session its tests run in. Used by one
    thread at a time, as an agent's loop is."""

    def __init__(
        self,
        root: Path,
        box: Box,
        plan: TestPlan,
        timeout_s: float,
        output_cap: int,
        tool_set: str = "all",
        test_slot: AbstractContextManager[Any] = NO_SLOT,
    ) -> None:
        self.root, self.box, self.plan = root, box, plan
        self.timeout_s, self.output_cap = timeout_s, output_cap
        self.tools = TOOL_SETS[tool_set]
        self.test_slot = test_slot
        self.originals: dict[str, Original] = {}
        self._root_fd = os.open(root, OPEN_DIRECTORY)

    def close(self) -> None:
        os.close(self._root_fd)

    def run(self, call: ToolCall) -> ToolOutcome:
        started = time.perf_counter()
        try:
            arguments = self._arguments(call)
            content, truncated = getattr(self, f"_{call.name}")(**arguments)
        except ToolError as exc:
            return ToolOutcome(str(exc), is_error=True, ms=_ms_since(started))
        submitted = call.name == "submit"
        return ToolOutcome(content, submitted=submitted, truncated=truncated, ms=_ms_since(started))

    def diff(self) -> str:
        """Every file changed through the tools, as a unified diff ``git apply`` takes on a fresh
        copy ("" when nothing changed): what each holds now against what it held before."""
        return "".join(
            _file_diff(path, original, self._current(path)) for path, original in sorted(self.originals.items())
        )

    # The model's call, checked against the tool's declared parameters.

    def _arguments(self, call: ToolCall) -> dict[str, Any]:
        if call.name not in self.tools:
            raise ToolError(f"there is no tool {call.name!r}; the tools are: {', '.join(self.tools)}")
        if call.malformed:
            shown = call.malformed[:200]
            raise ToolError(f"the arguments of {call.name} are not a JSON object: {shown!r}; nothing was run")
        parameters = {parameter.name: parameter for parameter in TOOLS[call.name][1]}
        if unknown := sorted(set(call.arguments) - set(parameters)):
            raise ToolError(
                f"{call.name} takes no argument {', '.join(unknown)}; it takes: {', '.join(parameters) or 'none'}"
            )
        given = {name: value for name, value in call.arguments.items() if value is not None}
        for parameter in parameters.values():
            if parameter.name not in given:
                if parameter.required:
                    raise ToolError(f"{call.name} needs the argument {parameter.name!r}")
            elif not _is_of_type(given[parameter.name], parameter.type):
                article = "an" if parameter.type == "integer" else "a"
                raise ToolError(f"{call.name}'s argument {parameter.name!r} must be {article} {parameter.type}")
        return given

    # The tools. Each returns its output and whether it was cut.

    def _list_files(self, path: str = ".") -> tuple[str, bool]:
        listing, complete = self._collected(_parts(path, root_allowed=True), _listed)
        return _listing(listing, complete, self.output_cap, "(no files)", "list a subdirectory to see more")

    def _read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> tuple[str, bool]:
        lines = _text_lines(self._text(_parts(path)))
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ToolError(f"start_line {start_line}, end_line {end_line}: start at 1 or more, end at start or later")
        if not lines:
            return "(empty file)", False
        if start_line > len(lines):
            raise ToolError(f"{path} has {len(lines)} lines; start_line {start_line} is past its end")
        last = min(end_line or len(lines), len(lines))
        return _numbered(lines, start_line, last, self.output_cap)

    def _search(self, pattern: str, path: str = ".", regex: bool = False) -> tuple[str, bool]:
        if not pattern:
            raise ToolError("the pattern is empty")
        try:
            matcher = re.compile(pattern if regex else re.escape(pattern))
        except re.error as exc:
            raise ToolError(f"the pattern is not a valid regular expression: {exc}") from None
        parts = _parts(path, root_allowed=True)

        def matches(relative: str, directory: int, link: bool = False) -> list[str]:
            text = "" if link else _searchable(directory, relative.rsplit("/", 1)[-1])
            return [
                f"{relative}:{number}: {line[:SEARCH_LINE_CHARS]}" for number, line in _matching(text, matcher, regex)
            ]

        if parts and self._is_file(parts):
            with self._directory(parts[:-1]) as directory:
                found, complete = matches(_joined(parts), directory), True
        else:
            found, complete = self._collected(parts, matches)
        return _listing(found, complete, self.output_cap, f"no match for {pattern!r}", "narrow the path or the pattern")

    def _replace(self, path: str, old: str, new: str) -> tuple[str, bool]:
        parts = _writable_parts(path)
        if not old:
            raise ToolError("old is empty: give the exact text to replace")
        text = self._text(parts)
        if (count := text.count(old)) != 1:
            hint = "check its exact text with read_file" if count == 0 else "include more surrounding lines"
            raise ToolError(f"old occurs {count} times in {path}, not exactly once: {hint}; nothing was changed")
        self._write(parts, text.replace(old, new, 1))
        return f"replaced 1 occurrence in {path}", False

    def _write_file(self, path: str, content: str) -> tuple[str, bool]:
        parts = _writable_parts(path)
        self._write(parts, content)
        return f"wrote {path} ({len(_text_lines(content))} lines)", False

    def _run_tests(self, test: str | None = None) -> tuple[str, bool]:
        command = self._test_command(test)
        with self.test_slot:
            built = self.plan.build_checkout(self.box, self.timeout_s)
            if built.ok is False:
                return _tail("the checkout build failed, so no test ran", built.log, self.output_cap)
            finished, _ = run_tests(command, self.box, self.timeout_s, self.plan.log_parser, self.plan.python)
        status = f"timed out after {self.timeout_s:g}s" if finished.timed_out else f"exit status {finished.returncode}"
        output = finished.output.replace(CHECKOUT_MARK + "/", "").replace(CHECKOUT_MARK, ".")
        return _tail(status, output, self.output_cap)

    def _submit(self) -> tuple[str, bool]:
        return "submitted", False

    # Paths, walked from the working copy's descriptor without following any link.

    @contextlib.contextmanager
    def _directory(self, parts: list[str], create: bool = False) -> Iterator[int]:
        """A descriptor of the directory ``parts`` names (made, owned by the sandbox user,
        when ``create``); every component a real directory, never a link."""
        fd = os.dup(self._root_fd)
        try:
            for index, name in enumerate(parts):
                shown = _joined(parts[: index + 1])
                if create and not _exists(name, fd):
                    os.mkdir(name, 0o755, dir_fd=fd)
                    self._give(name, fd)
                try:
                    next_fd = os.open(name, OPEN_DIRECTORY, dir_fd=fd)
                except OSError as exc:
                    raise ToolError(_why_not_a_directory(shown, name, fd, exc)) from None
                os.close(fd)
                fd = next_fd
            yield fd
        finally:
            os.close(fd)

    def _files(self, directory: int, prefix: str) -> Generator[tuple[str, int, bool]]:
        """The files under ``directory``, depth first in name order: each one's path, its
        directory's descriptor and whether it is a symbolic link (never followed)."""
        with os.scandir(directory) as scanned:
            entries = sorted(scanned, key=lambda entry: entry.name)
        for entry in entries:
            relative = f"{prefix}/{entry.name}" if prefix else entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_DIRECTORIES:
                    yield from self._inner_files(directory, entry.name, relative)
            elif entry.is_symlink() or entry.is_file(follow_symlinks=False):
                yield relative, directory, entry.is_symlink()

    def _inner_files(self, directory: int, name: str, relative: str) -> Generator[tuple[str, int, bool]]:
        try:
            inner = os.open(name, OPEN_DIRECTORY, dir_fd=directory)
        except OSError:
            return  # gone, or made unreadable by the tests: nothing to show of it
        try:
            yield from self._files(inner, relative)
        finally:
            os.close(inner)

    def _collected(self, parts: list[str], describe: Callable[[str, int, bool], list[str]]) -> tuple[list[str], bool]:
        """What ``describe`` says of each file under ``parts``, until the output cap is passed;
        and whether every file was seen."""
        found: list[str] = []
        size = 0
        with self._directory(parts) as directory, contextlib.closing(self._files(directory, _joined(parts))) as files:
            for relative, parent, link in files:
                for line in describe(relative, parent, link):
                    found.append(line)
                    size += len(line) + 1
                if size > self.output_cap:
                    return found, False
        return found, True

    def _is_file(self, parts: list[str]) -> bool:
        with self._directory(parts[:-1]) as directory:
            try:
                return stat.S_ISREG(os.stat(parts[-1], dir_fd=directory, follow_symlinks=False).st_mode)
            except FileNotFoundError:
                raise ToolError(f"{_joined(parts)}: no such file or directory") from None

    def _text(self, parts: list[str]) -> str:
        shown = _joined(parts)
        with self._directory(parts[:-1]) as directory:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | OPEN_FILE, dir_fd=directory)
            except OSError as exc:
                raise ToolError(_why_not_a_file(shown, parts[-1], directory, exc)) from None
            with _closing(fd):
                _check_regular(shown, os.fstat(fd))
                return _decoded(shown, _read_all(fd))

    def _write(self, parts: list[str], content: str) -> None:
        """Write ``content`` to the file ``parts`` names, keeping what it held before the first
        change. A new file (and its directories) belongs to the sandbox user, for the tests."""
        shown = _joined(parts)
        with self._directory(parts[:-1], create=True) as directory:
            created = not _exists(parts[-1], directory)
            flags = os.O_RDWR | OPEN_FILE | (os.O_CREAT | os.O_EXCL if created else 0)
            try:
                fd = os.open(parts[-1], flags, NEW_FILE_MODE, dir_fd=directory)
            except OSError as exc:
                raise ToolError(_why_not_a_file(shown, parts[-1], directory, exc)) from None
            with _closing(fd):
                status = os.fstat(fd)
                _check_regular(shown, status)
                before = _read_all(fd)
                if not created:
                    _decoded(shown, before)  # a binary file is not edited as text
                else:
                    os.fchmod(fd, NEW_FILE_MODE)  # not left to the umask
                    self._give_fd(fd)
                self.originals.setdefault(shown, Original(None if created else before, stat.S_IMODE(status.st_mode)))
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                _write_all(fd, content.encode())

    def _current(self, shown: str) -> bytes | None:
        """What a changed file holds now; None when it is gone (or the tests left something
        there that is not a regular file, which a patch cannot carry)."""
        parts = shown.split("/")
        try:
            with self._directory(parts[:-1]) as directory:
                fd = os.open(parts[-1], os.O_RDONLY | OPEN_FILE, dir_fd=directory)
        except (ToolError, OSError):
            return None
        with _closing(fd):
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1:
                return None
            return _read_all(fd)

    def _give(self, name: str, directory: int) -> None:
        if self.box.uid is not None:
            os.chown(name, self.box.uid, self.box.uid, dir_fd=directory, follow_symlinks=False)

    def _give_fd(self, fd: int) -> None:
        if self.box.uid is not None:
            os.fchown(fd, self.box.uid, self.box.uid)

    # The test command, narrowed.

    def _test_command(self, test: str | None) -> list[str]:
        command = list(self.plan.command)
        if test is None:
            return command
        if test.startswith("-") or not test.strip():
            raise ToolError("test names one test file or node id, not an option")
        try:
            check_relative_path(test.split("::", 1)[0])
        except PatchRejected:
            raise ToolError(f"{test!r} is not inside the working copy") from None
        return [*without_selection(command, self.root), test]


@contextlib.contextmanager
def workspace(
    root: AbstractContextManager[Path],
    plan: TestPlan,
    timeout_s: float,
    output_cap: int,
    tool_set: str = "all",
    test_slot: AbstractContextManager[Any] = NO_SLOT,
) -> Iterator[Workspace]:
    """A working copy made by ``root`` with what the environment's build made in it, and ONE
    sandbox session for its tests, kept for the workspace's life. ``test_slot`` (reusable: a
    semaphore) is held during each test run: the worker's bound on test runs at once."""
    with root as directory:
        plan.warm_start(directory)
        with sandbox_session(directory, plan.surroundings(directory)) as box:
            opened = Workspace(directory, box, plan, timeout_s, output_cap, tool_set, test_slot)
            try:
                yield opened
            finally:
                opened.close()


def without_selection(command: list[str], root: Path) -> list[str]:
    """The test command less the tests it selects (the arguments after its runner naming a
    file or directory of the working copy, or a node id), so that one test can be asked for."""
    runner = _runner_length(command)
    kept = command[:runner]
    for index in range(runner, len(command)):
        argument, previous = command[index], command[index - 1]
        takes_value = previous in VALUE_OPTIONS or (previous.startswith("--") and "=" not in previous)
        selects = not argument.startswith("-") and ("::" in argument or os.path.lexists(root / argument))
        if not (selects and not takes_value):
            kept.append(argument)
    return kept


def _runner_length(command: list[str]) -> int:
    """How many arguments start the command before its options: ``{python} -m pytest``,
    ``{python} tests/runtests.py``, ``bin/test``."""
    if len(command) >= 3 and command[1] == "-m":
        return 3
    if len(command) >= 2 and "python" in command[0] and not command[1].startswith("-"):
        return 2
    return min(1, len(command))


# Paths as the model gives them.


def _parts(path: str, root_allowed: bool = False) -> list[str]:
    if "\x00" in path:
        raise ToolError("a path cannot hold a NUL character")
    if path.startswith("/"):
        raise ToolError(f"{path!r} is absolute: give a path relative to the repository's root")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ToolError(f"{path!r} leads outside the working copy ('..' is refused)")
    if not parts and not root_allowed:
        raise ToolError(f"{path!r} names the repository's root, not a file")
    return parts


def _writable_parts(path: str) -> list[str]:
    """A path the answer's patch may carry (not under .git, not compiled Python, no control
    character: a tab or a newline would end the name in the diff's header)."""
    parts = _parts(path)
    if any(character < " " or character == "\x7f" for character in path):
        raise ToolError(f"{path!r} holds a control character; nothing was written")
    try:
        check_relative_path(_joined(parts))
        check_not_compiled(_joined(parts))
    except PatchRejected as exc:
        raise ToolError(f"{exc}; nothing was written") from None
    return parts


def _joined(parts: list[str]) -> str:
    return "/".join(parts)


def _exists(name: str, directory: int) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _why_not_a_directory(shown: str, name: str, directory: int, error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return f"{shown}: no such directory"
    if _is_link(name, directory):
        return f"{shown} is a symbolic link: links are not followed"
    if error.errno == errno.ENOTDIR:
        return f"{shown} is a file, not a directory"
    return f"{shown} cannot be opened ({os.strerror(error.errno or 0)})"


def _why_not_a_file(shown: str, name: str, directory: int, error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return f"{shown}: no such file"
    if _is_link(name, directory):
        return f"{shown} is a symbolic link: links are not followed"
    if error.errno == errno.EISDIR:
        return f"{shown} is a directory: list_files lists it"
    return f"{shown} cannot be opened ({os.strerror(error.errno or 0)})"


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1024**2):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, content: bytes) -> None:
    pending = memoryview(content)
    while pending:
        pending = pending[os.write(fd, pending) :]


def _check_regular(shown: str, status: os.stat_result) -> None:
    if stat.S_ISDIR(status.st_mode):
        raise ToolError(f"{shown} is a directory: list_files lists it")
    if not stat.S_ISREG(status.st_mode):
        raise ToolError(f"{shown} is not a regular file")
    if status.st_nlink > 1:  # a hard link the tests made, perhaps to a file of the worker's
        raise ToolError(f"{shown} has other hard links: refused")
    if status.st_size > MAX_FILE_BYTES:
        raise ToolError(
            f"{shown} is {status.st_size} bytes, more than the tools read ({MAX_FILE_BYTES}): search it instead"
        )


def _decoded(shown: str, content: bytes) -> str:
    try:
        if b"\x00" not in content:
            return content.decode()
    except UnicodeDecodeError:
        pass
    raise ToolError(f"{shown} is a binary file ({len(content)} bytes): the tools read and edit text only")


def _searchable(directory: int, name: str) -> str:
    """A file's text for search; "" for what the tools would not read (binary, huge, a link)."""
    try:
        fd = os.open(name, os.O_RDONLY | OPEN_FILE, dir_fd=directory)
    except OSError:
        return ""
    with _closing(fd):
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_nlink > 1 or status.st_size > MAX_FILE_BYTES:
            return ""
        content = _read_all(fd)
    try:
        return "" if b"\x00" in content else content.decode()
    except UnicodeDecodeError:
        return ""


def _matching(text: str, matcher: re.Pattern[str], regex: bool) -> Iterator[tuple[int, str]]:
    # Most files hold no match: a text is looked for in the whole file first. Not a regular
    # expression, whose anchors mean something else there.
    if not text or (not regex and not matcher.search(text)):
        return
    for number, line in enumerate(_text_lines(text), start=1):
        if matcher.search(line):
            yield number, line


def _listed(relative: str, directory: int, link: bool) -> list[str]:
    return [f"{relative} (a symbolic link: not followed)" if link else relative]


def _text_lines(text: str) -> list[str]:
    """Lines as git, grep and editors number them: split at newlines only."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _is_of_type(value: Any, wanted: str) -> bool:
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool}[wanted])


# Output, capped.


def _listing(lines: list[str], complete: bool, cap: int, nothing: str, narrower: str) -> tuple[str, bool]:
    """Lines of a listing or search, cut at a line's end within the cap, saying so."""
    if not lines:
        return nothing, False
    kept, size = [], 0
    for line in lines:
        if size + len(line) + 1 > cap:
            break
        kept.append(line)
        size += len(line) + 1
    if complete and len(kept) == len(lines):
        return "\n".join(kept), False
    return "\n".join(kept) + f"\n[output cut at {cap} characters: {len(kept)} lines shown; {narrower}]", True


def _numbered(lines: list[str], first: int, last: int, cap: int) -> tuple[str, bool]:
    shown: list[str] = []
    size = 0
    for number in range(first, last + 1):
        line = f"{number}\t{lines[number - 1]}"
        if size + len(line) + 1 > cap and shown:
            shown_lines = f"lines {first}-{number - 1} of {len(lines)} shown"
            note = f"[output cut at {cap} characters: {shown_lines}; read on from start_line={number}]"
            return "\n".join([*shown, note]), True
        if len(line) > cap:  # one line longer than the cap (minified code, data): its start
            note = f"[line {number} cut: its first {cap} of {len(line)} characters shown; search finds text in it]"
            return "\n".join([*shown, line[:cap], note]), True
        shown.append(line)
        size += len(line) + 1
    return "\n".join(shown), False


def _tail(status: str, output: str, cap: int) -> tuple[str, bool]:
    """The status line, then the output's end: where a test run says what failed and why."""
    if len(output) <= cap:
        return f"{status}\n{output}", False
    return f"{status}\n[output cut: the last {cap} of {len(output)} characters shown]\n{output[-cap:]}", True


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


# The diff.


def _file_diff(path: str, original: Original, current: bytes | None) -> str:
    if original.content == current:
        return ""
    header = [f"diff --git a/{path} b/{path}\n"]
    if original.content is None:
        header.append(f"new file mode 100{NEW_FILE_MODE:o}\n")
    elif current is None:
        header.append(f"deleted file mode 100{original.mode:o}\n")
    before, after = _lines(original.content), _lines(current)
    if not before and not after:
        return "".join(header)  # an empty file made or removed: the header says it all
    source = f"a/{path}" if original.content is not None else "/dev/null"
    target = f"b/{path}" if current is not None else "/dev/null"
    body = difflib.unified_diff(before, after, source, target, lineterm="\n")
    return "".join(header) + "".join(_ended(line) for line in body)


def _lines(content: bytes | None) -> list[str]:
    """Lines split at newlines only (a form feed or a carriage return stays in its line, as
    git sees it), each keeping its newline; the last may have none."""
    if not content:
        return []
    text = content.decode(errors="replace")  # the tests may have left anything there
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
