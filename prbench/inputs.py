"""Input hygiene shared by the forms, the management commands and the API.

Each rule is written once here; callers only choose which one applies to a value. Every
problem comes back as a sentence naming the field (and the file and line where there is
one), so a bad input is a clear error and never a traceback or a 500.

Why these rules: Postgres cannot store a NUL character in text or JSON, psycopg cannot
encode a lone surrogate (what Python makes of invalid UTF-8 in argv), Python's JSON and
YAML parsers recurse once per nesting level, YAML silently keeps the last of two equal
keys, and JSON numbers such as NaN parse in Python but are refused by ``jsonb``.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

# --- limits: one place, so the form, the command and the API refuse the same thing ---------

NAME_MAX = 200  # organisation, dataset and experiment names, model ids (their columns' size)
LABEL_MAX = 100  # arm labels (their column's size)
EMAIL_MAX = 254  # RFC 5321's longest forward path
DESCRIPTION_MAX = 10_000  # a few paragraphs; the description is shown on every experiment page
PROMPT_TEMPLATE_MAX = 100_000  # the default is ~400 characters; 100k leaves room for long rubrics
ARM_CONFIG_MAX_BYTES = 16 * 1024  # a config holds a dozen sampling settings: a few hundred bytes
# A spec is names, a prompt template (at most 100k characters, so at most 400 KB of UTF-8)
# and a few arms: 1 MiB holds the largest legitimate one with room to spare.
SPEC_FILE_MAX_BYTES = 1024 * 1024
# One SWE-bench task per line: the largest lines of the full SWE-bench set (big test patches)
# are a few hundred kilobytes; 8 MiB bounds the memory one line can take.
JSONL_LINE_MAX_BYTES = 8 * 1024 * 1024
NESTING_MAX = 64  # far below Python's recursion limit (1000), far above any real spec (~4)
# An alias-heavy YAML document ("billion laughs") is small on disk and huge once expanded.
DOCUMENT_VALUES_MAX = 100_000

# --- characters ------------------------------------------------------------------------------

_SURROGATES = re.compile("[\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# C0 and C1 controls and DEL. Multi-line text keeps tab, newline and carriage return.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
_MULTILINE_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Bidirectional embeddings, overrides and isolates: in a name they make what is shown differ
# from what is stored ("Trojan Source"). Marks (U+200E/U+200F) stay allowed.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _where(text: str, index: int) -> str:
    return f"U+{ord(text[index]):04X} at character {index + 1}"


def storable_problem(value: str) -> str | None:
    """What stops the database from storing ``value`` as it is: a NUL or a lone surrogate."""
    if (position := value.find("\x00")) >= 0:
        return f"contains a NUL character at character {position + 1}"
    if found := _SURROGATES.search(value):
        return f"contains a lone surrogate ({_where(value, found.start())}): not valid Unicode text"
    return None


def text_problem(value: Any, max_chars: int, *, multiline: bool = False) -> str | None:
    """Why ``value`` is not acceptable text, or None. Names (``multiline=False``) refuse every
    control character and bidirectional override; multi-line text keeps tab and newlines."""
    if not isinstance(value, str):
        return f"must be text, not {type(value).__name__}"
    if len(value) > max_chars:
        return f"is {len(value):,} characters long; at most {max_chars:,} are allowed"
    if problem := storable_problem(value):
        return problem
    if found := (_MULTILINE_CONTROLS if multiline else _CONTROLS).search(value):
        return f"contains a control character ({_where(value, found.start())})"
    if not multiline and (found := _BIDI.search(value)):
        return f"contains a bidirectional override ({_where(value, found.start())})"
    return None


def normalised_newlines(text: str) -> str:
    """Every line break as ``\n``: browsers submit a textarea with CRLF, so without this a
    prompt typed in the browser and the same prompt in a spec are two texts, hashed as two
    prompt versions, and a default the browser sent back unchanged no longer equals itself."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_errors(value: Any, field: str, max_chars: int, *, multiline: bool = False) -> list[str]:
    problem = text_problem(value, max_chars, multiline=multiline)
    return [f"{field}: {problem}"] if problem else []


def check_text(value: Any, field: str, max_chars: int, *, multiline: bool = False) -> str:
    """``value`` if it is acceptable text; otherwise a ValidationError naming ``field``."""
    errors = text_errors(value, field, max_chars, multiline=multiline)
    if errors:
        raise ValidationError(errors)
    return value


class TextValidator:
    """The same rule as a Django form/model field validator."""

    def __init__(self, max_chars: int, multiline: bool = False):
        self.max_chars, self.multiline = max_chars, multiline

    def __call__(self, value: Any) -> None:
        problem = text_problem(value, self.max_chars, multiline=self.multiline)
        if problem:
            raise ValidationError(f"This field {problem}.", code="invalid_text")


# --- JSON-like documents -----------------------------------------------------------------------


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def document_problems(value: Any, root: str = "") -> list[str]:
    """Everything in a parsed document that cannot be stored as JSON in Postgres: non-string
    keys, NaN and infinities, NUL characters and lone surrogates, dates and other YAML-only
    types, nesting deeper than NESTING_MAX, more than DOCUMENT_VALUES_MAX values. Iterative,
    so a deep document cannot exhaust the stack."""
    problems: list[str] = []
    stack: list[tuple[str, Any, int]] = [(root, value, 0)]
    seen = 0
    while stack and len(problems) < 20:
        path, item, depth = stack.pop()
        where = path or "top level"
        seen += 1
        if seen > DOCUMENT_VALUES_MAX:
            return [f"more than {DOCUMENT_VALUES_MAX:,} values (YAML aliases count once per use)"]
        if depth > NESTING_MAX:
            problems.append(f"{where}: nested more than {NESTING_MAX} levels deep")
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if not isinstance(key, str):
                    problems.append(f"{where}: key {key!r} is not a string")
                elif problem := storable_problem(key):
                    problems.append(f"{where}: a key {problem}")
                else:
                    stack.append((_path(path, key), child, depth + 1))
        elif isinstance(item, list):
            stack.extend((_path(path, i), child, depth + 1) for i, child in reversed(list(enumerate(item))))
        elif isinstance(item, str):
            if problem := storable_problem(item):
                problems.append(f"{where}: {problem}")
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{where}: {item} is not a number JSON can hold")
        elif not (item is None or isinstance(item, (bool, int, float))):
            problems.append(f"{where}: a {type(item).__name__} is not allowed here (quote it to make it text)")
    return problems


def json_nesting(text: str) -> int:
    """How deep the brackets of a JSON text go, strings left out: checked before parsing,
    since Python's JSON parser recurses once per level."""
    depth = deepest = 0
    for bracket in _JSON_BRACKETS.findall(_JSON_STRINGS.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


# A string runs to its closing quote, or to the end of an unterminated one: were an
# unterminated string no match, the search would start again at each later quote and scan to
# the end each time (quadratic: one malformed 8 MiB line took hours). Possessive, so no
# backtracking either.
_JSON_STRINGS = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\Z)', re.DOTALL)
_JSON_BRACKETS = re.compile(r"[\[\]{}]")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(f"the key {key!r} appears twice in one object")


class JsonRejected(ValueError):
    def __init__(self, problem: str, line: int = 1):
        super().__init__(problem)
        self.line = line


def parse_json(text: str) -> Any:
    """JSON text parsed with the limits above (nesting, duplicate keys); JsonRejected
    otherwise. What the value holds is for ``document_problems`` to judge."""
    if json_nesting(text) > NESTING_MAX:
        raise JsonRejected(f"nested more than {NESTING_MAX} levels deep")
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise JsonRejected(f"{exc.msg} at column {exc.colno}", exc.lineno) from None
    except ValueError as exc:  # a duplicate key, or an integer too long to convert
        raise JsonRejected(_value_error(exc)) from None


def load_json(text: str, where: str) -> Any:
    """Parse JSON text with the limits above; ValidationError (prefixed ``where``) otherwise."""
    try:
        return parse_json(text)
    except JsonRejected as exc:
        raise ValidationError(f"{where}:{exc.line}: invalid JSON: {exc}") from None


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML would keep the last silently) and nesting
    deeper than NESTING_MAX (the composer recurses once per level)."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > NESTING_MAX:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nested more than {NESTING_MAX} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:
                    continue  # unhashable: SafeConstructor refuses it with its own message
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} appears twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, where: str) -> Any:
    try:
        return yaml.load(text, Loader=_SpecLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise ValidationError(f"{where}{line}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:  # e.g. an integer too long to convert
        raise ValidationError(f"{where}: invalid YAML: {_value_error(exc)}") from None


def _value_error(exc: ValueError) -> str:
    return "a number with too many digits" if "digits" in str(exc) else str(exc)


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as text, or a ValidationError naming the line and byte of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValidationError(f"{where}:{line}: {utf8_problem(data, exc)}") from None


def utf8_problem(data: bytes, exc: UnicodeDecodeError) -> str:
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at byte {column} of the line)"


def load_spec(data: str | bytes, filename: str) -> Any:
    """A JSON (``*.json``) or YAML spec as a JSON-like document, or ValidationError(s), each
    naming the file (and line where known)."""
    if len(data) > SPEC_FILE_MAX_BYTES:
        raise ValidationError(f"{filename}: larger than {SPEC_FILE_MAX_BYTES:,} bytes")
    text = decode_utf8(data, filename) if isinstance(data, bytes) else data
    if found := _UNSTORABLE.search(text):  # the parsers would refuse it less clearly, or not at all
        at = found.start()
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        kind = "a NUL character" if text[at] == "\x00" else "a lone surrogate"
        raise ValidationError(f"{filename}:{line}: {kind} at character {column} of the line")
    document = load_json(text, filename) if filename.endswith(".json") else load_yaml(text, filename)
    problems = document_problems(document)
    if problems:
        raise ValidationError([f"{filename}: {p}" for p in problems])
    return document


# --- commands ----------------------------------------------------------------------------------


def argument_problem(value: str) -> str | None:
    """Command-line text that cannot reach the database: a NUL, or a lone surrogate (how
    Python hands over invalid UTF-8 in argv)."""
    problem = storable_problem(value)
    if problem and "surrogate" in problem:
        return "is not valid UTF-8 text"
    return problem


class CheckedCommand(BaseCommand):
    """A management command whose text arguments are checked before ``handle`` sees them,
    so no command can hand a NUL or undecodable bytes to a query."""

    def execute(self, *args: Any, **options: Any) -> Any:
        positional = {a.dest for a in self.create_parser("manage.py", "command")._actions if not a.option_strings}
        named = [(key if key in positional else f"--{key.replace('_', '-')}", value) for key, value in options.items()]
        for option, value in [*(("argument", a) for a in args), *named]:
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, str) and (problem := argument_problem(item)):
                    raise CommandError(f"{option} {problem}")
        return super().execute(*args, **options)


# --- files named on a command line ---------------------------------------------------------------

_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def open_input_file(path: str | Path, max_bytes: int, limit_name: str = "") -> BinaryIO:
    """``path`` opened for reading if it is a regular file of at most ``max_bytes``; a
    CommandError naming the path otherwise, before a byte is read. A named pipe would block
    the command, a device such as /dev/zero never end, a directory fail mid-read. The file
    is opened without blocking (so a pipe cannot hang the open itself) and checked on the
    open descriptor, so what was checked is what is read. A file of /proc says it is empty
    whatever it holds, so reading past ``max_bytes`` is a CommandError too."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise CommandError(f"{path}: cannot read: {exc.strerror}; nothing read") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            kind = _FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
            raise CommandError(f"{path}: not a regular file ({kind}); nothing read")
        if info.st_size > max_bytes:
            raise CommandError(_too_large(path, max_bytes, limit_name, f"it has {info.st_size:,}"))
        os.set_blocking(descriptor, True)
        raw = io.FileIO(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    return io.BufferedReader(_CappedFile(raw, _too_large(path, max_bytes, limit_name, "it has more"), max_bytes))


class _CappedFile(io.RawIOBase):
    """A file that refuses to be read past ``max_bytes``, with ``refusal`` as the CommandError."""

    def __init__(self, raw: io.FileIO, refusal: str, max_bytes: int):
        self.raw, self.refusal, self.left = raw, refusal, max_bytes

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self.raw.readinto(buffer) or 0
        self.left -= count
        if self.left < 0:
            raise CommandError(self.refusal)
        return count

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()
        super().close()


def read_input_file(path: str | Path, max_bytes: int, limit_name: str = "") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see ``open_input_file``;
    ``limit_name`` says where the limit is set). A read the kernel refuses (/proc/self/mem)
    is a CommandError too."""
    with open_input_file(path, max_bytes, limit_name) as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise CommandError(f"{path}: cannot read: {exc.strerror}; nothing read") from None


def _too_large(path: str | Path, max_bytes: int, limit_name: str, size: str) -> str:
    limit = f" ({limit_name})" if limit_name else ""
    return f"{path}: larger than {max_bytes:,} bytes{limit}, {size}; nothing read"
