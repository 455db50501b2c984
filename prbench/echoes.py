"""Where a text echoes a key, in whatever form a provider or a model turned it into.

A key does not only come back as itself. A model asked not to repeat it upper-cases it,
reverses it, spells it out one character per line or base64-encodes it; a provider's error
page percent-encodes or HTML-escapes it. ``EchoFinder`` finds each of these as a span of the
original text, for ``prbench/redaction.py`` (the one place that replaces them) to remove:

- runs: any ``MIN_RUN`` or more of the key's characters in a row, in any case; reversed too;
- spelled out: the key's letters and digits in order, anything else between them (``s k - a``,
  ``s-k-a``, one per line, commas), forwards or reversed; and its hex encoding, spaced or not;
- base64: standard or URL-safe, padded or not, of the key as typed, upper- or lower-cased,
  alone or inside a longer blob (the key's bytes at any of the three offsets in a group);
- each of those after ``%XX``, ``&#115;``/``&#x73;`` and ``\\uXXXX``/``\\xXX`` escapes are
  decoded, whether every character was escaped or only some.

A span covers the whole echo, separators and base64 characters partly made of the key's bits
included, so no fragment of the key survives it.

How, cheaply enough for every answer and log line: escapes are decoded, then the text is
seen through two views (lower-cased; its letters and digits only, lower-cased), each searched
in one pass by an Aho-Corasick automaton built once per set of keys. Positions in a view are
mapped back to the text only when something was found, so a clean text costs a few C-speed
passes and no Python loop over its characters.

The floor: the loose forms (reversed, spelled out, hex, base64) are looked for only for keys
with at least ``LOOSE_MIN`` (16) letters and digits. Spelled-out matching ignores everything
but letters and digits, so a short key is found across ordinary words ("pass word" for a key
"password"), and a short key's base64 is a string short enough to turn up in random data. 16
random letters and digits are about 36**16, 8e24, lower-cased strings: no text holds one by
chance, and every provider key PRBench takes is longer (OpenAI's and Anthropic's 50 to 110
characters, Azure's 32 or 84, webhook secrets 30 or more). A key of 8 to 15 characters is
still found as a run of 8 in any case.
"""

from __future__ import annotations

import base64
import re
import string
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import ahocorasick

MIN_RUN = 8  # the shortest run of a key's characters that counts as leaking it
MIN_SECRET = 8  # shorter keys cannot be told from ordinary text, so are not searched for
LOOSE_MIN = 16  # the fewest letters and digits a key needs for its loose forms (see above)

ESCAPE = re.compile(
    r"%(?P<percent>[0-9A-Fa-f]{2})"
    r"|&#[xX](?P<hex_reference>[0-9A-Fa-f]{1,6});?"
    r"|&#(?P<decimal_reference>[0-9]{1,7});?"
    r"|\\u(?P<unicode>[0-9A-Fa-f]{4})"
    r"|\\x(?P<byte>[0-9A-Fa-f]{2})"
)
LETTERS_AND_DIGITS = re.compile(r"[0-9a-z]+")  # of the lower-cased view
# Every byte but ASCII letters and digits: deleting them from the UTF-8 of the lower-cased
# view gives its letters and digits (a non-ASCII character is a separator too).
NOT_LETTER_OR_DIGIT = bytes(byte for byte in range(256) if not chr(byte).isascii() or not chr(byte).isalnum())
BASE64_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + "+/-_")  # both alphabets, of a lower-cased view
URL_SAFE = str.maketrans("+/", "-_")


@dataclass(frozen=True)
class Form:
    """What a pattern found in a view stands for: its length, and for base64 whether a
    character partly made of the key's bits may sit just before or after it, and padding."""

    length: int
    partial_before: bool = False
    partial_after: bool = False
    base64: bool = False


Span = tuple[int, int]


class EchoFinder:
    """The echoes of a set of keys; build once per set (``redaction.echo_finder`` caches)."""

    def __init__(self, keys: Iterable[str]) -> None:
        keys = [key for key in keys if len(key) >= MIN_SECRET]
        loose = [key for key in keys if is_loose(key)]
        # Base64 is looked for lower-cased too: one pass fewer, and an upper-cased blob still
        # narrows the key down; 20 or more characters in any case match nothing by chance.
        lowered = [form for key in keys for form in run_patterns(key)]
        lowered += [(_lower(text), form) for key in loose for text, form in base64_patterns(key)]
        self._lowered = _automaton(lowered)
        self._spelled = _automaton(form for key in loose for form in spelled_patterns(key))

    def spans(self, text: str) -> list[Span]:
        """Where the text echoes a key, as (start, end) of the text; overlapping, unsorted."""
        decoded = Decoded(text)
        lowered = _lower(decoded.text)
        found = [decoded.original(start, end) for start, end in _hits(self._lowered, lowered)]
        if self._spelled is not None:
            letters = lowered.encode("utf-8", "surrogatepass").translate(None, NOT_LETTER_OR_DIGIT).decode("ascii")
            hits = list(_hits(self._spelled, letters))
            if hits:
                positions = LetterPositions(lowered)
                found += [decoded.original(*positions.view_span(start, end)) for start, end in hits]
        return found


def is_loose(key: str) -> bool:
    return len(_letters(key)) >= LOOSE_MIN


def run_patterns(key: str) -> Iterator[tuple[str, Form]]:
    """Every ``MIN_RUN`` characters of the key in a row, lower-cased; of its reverse too."""
    lowered = _lower(key)
    for text in (lowered, lowered[::-1]) if is_loose(key) else (lowered,):
        for start in range(len(text) - MIN_RUN + 1):
            yield text[start : start + MIN_RUN], Form(MIN_RUN)


def spelled_patterns(key: str) -> Iterator[tuple[str, Form]]:
    """The key's letters and digits, forwards and reversed, and its hex encoding."""
    letters = _letters(key)
    for text in (letters, letters[::-1], key.encode().hex()):
        yield text, Form(len(text))


def base64_patterns(key: str) -> Iterator[tuple[str, Form]]:
    """The base64 characters made of the key's bits alone, for each of the three offsets its
    bytes can have inside a longer blob, in both alphabets, of the key as typed, upper- and
    lower-cased (what a model asked to "encode it" or "shout it" returns)."""
    for variant in dict.fromkeys([key, key.upper(), key.lower()]):
        data = variant.encode()
        for offset in range(3):
            encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
            first_bit, end_bit = 8 * offset, 8 * (offset + len(data))
            core = encoded[-(-first_bit // 6) : end_bit // 6]  # characters whose 6 bits are all the key's
            form = Form(len(core), first_bit % 6 != 0, end_bit % 6 != 0, base64=True)
            yield core, form
            yield core.translate(URL_SAFE), form


class Decoded:
    """The text with its escapes decoded, and the way back to the text's positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._view_starts: list[int] = []  # where each decoded escape is in the view
        self._escapes: list[Span] = []  # and where it was in the text
        if "%" not in text and "&#" not in text and "\\" not in text:
            return
        pieces, last, length = [], 0, 0
        for match in ESCAPE.finditer(text):
            character = _unescaped(match)
            if character is None:
                continue
            pieces += [text[last : match.start()], character]
            length += match.start() - last
            self._view_starts.append(length)
            self._escapes.append(match.span())
            length += 1
            last = match.end()
        if self._escapes:
            pieces.append(text[last:])
            self.text = "".join(pieces)

    def original(self, start: int, end: int) -> Span:
        """The text's span of the view's characters ``start`` to ``end`` (exclusive)."""
        return self._where(start)[0], self._where(end - 1)[1]

    def _where(self, index: int) -> Span:
        escape = bisect_right(self._view_starts, index) - 1
        if escape < 0:
            return index, index + 1
        if self._view_starts[escape] == index:
            return self._escapes[escape]
        position = self._escapes[escape][1] + index - self._view_starts[escape] - 1
        return position, position + 1


class LetterPositions:
    """Where each of a view's letters and digits is in the view: worked out only on a hit."""

    def __init__(self, view: str) -> None:
        self._letter_starts: list[int] = []
        self._view_starts: list[int] = []
        count = 0
        for match in LETTERS_AND_DIGITS.finditer(view):
            self._letter_starts.append(count)
            self._view_starts.append(match.start())
            count += match.end() - match.start()

    def view_span(self, start: int, end: int) -> Span:
        return self._view_index(start), self._view_index(end - 1) + 1

    def _view_index(self, letter: int) -> int:
        run = bisect_right(self._letter_starts, letter) - 1
        return self._view_starts[run] + letter - self._letter_starts[run]


def _unescaped(match: re.Match[str]) -> str | None:
    name = match.lastgroup
    assert name is not None
    try:
        return chr(int(match.group(name), 10 if name == "decimal_reference" else 16))
    except (ValueError, OverflowError):  # past U+10FFFF: not a character, so left as written
        return None


def _letters(key: str) -> str:
    return "".join(LETTERS_AND_DIGITS.findall(_lower(key)))


def _lower(text: str) -> str:
    """Lower-cased, one character for one, so positions stay those of the text: ``str.lower``
    unless it lengthens something (U+0130, the dotted capital I), then ASCII only."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _automaton(patterns: Iterable[tuple[str, Form]]) -> ahocorasick.Automaton | None:
    automaton = ahocorasick.Automaton()
    for text, form in patterns:
        if text:
            known = automaton.get(text, None)
            if known is not None:  # the same characters from two offsets: widen as either may need
                form = Form(
                    form.length,
                    form.partial_before or known.partial_before,
                    form.partial_after or known.partial_after,
                    form.base64 or known.base64,
                )
            automaton.add_word(text, form)
    if not len(automaton):
        return None
    automaton.make_automaton()
    return automaton


def _hits(automaton: ahocorasick.Automaton | None, view: str) -> Iterator[Span]:
    if automaton is None or not view:
        return
    for last, form in automaton.iter(view):
        start, end = last + 1 - form.length, last + 1
        yield _widened(view, start, end, form) if form.base64 else (start, end)


def _widened(view: str, start: int, end: int, form: Form) -> Span:
    """A base64 echo with the characters partly made of the key's bits, and its padding."""
    if form.partial_before and start > 0 and view[start - 1] in BASE64_CHARACTERS:
        start -= 1
    if form.partial_after and end < len(view) and view[end] in BASE64_CHARACTERS:
        end += 1
    for _ in range(2):  # "=" or "=="
        if end < len(view) and view[end] == "=":
            end += 1
    return start, end
