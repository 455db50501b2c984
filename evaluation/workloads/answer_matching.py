"""Short answers compared the way a quiz judge compares them: normalised forms, Jeopardy's
conventions, and fuzzy similarity (rapidfuzz) with a threshold that depends on the answer.

The modes (an experiment's ``grading``):

- ``strict``: the normalised forms are equal (case, accents, punctuation, spacing ignored).
- ``lenient``: fuzzy similarity of the normalised forms of at least ``LENIENT_THRESHOLD``.
- ``adaptive``: the threshold depends on the expected answer: numbers (digits or number
  words) and short names must match exactly, medium answers nearly, long phrases loosely.
- ``jeopardy``: as a Jeopardy judge reads a response: articles ignored, a parenthesised part
  optional ("(Dwyane) Wade" takes "Wade"; "the hare (jackrabbit)" takes "hare" and
  "jackrabbit"), numerals and number words alike ("4" is "four"), then the adaptive rule.

Every mode reads the response inside its Jeopardy phrasing ("What is ...?", "Who are ...?")
and after an "Answer:" marker: the default prompt asks for that phrasing, so refusing it in
strict mode would grade the format, not the answer. Pure functions, no database.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import product

from rapidfuzz import fuzz

MODES = ("jeopardy", "strict", "lenient", "adaptive")  # the first is qa_exact's default
LENIENT_THRESHOLD = 0.8
# adaptive: (the kind of expected answer, how similar a response must be). Exact for
# numbers and short names, where one letter is another answer ("Wade" and "Wide", "1812"
# and "1813"); looser as the phrase grows and a typo matters less.
SHORT_CHARS, SHORT_WORDS, MEDIUM_CHARS = 12, 2, 24
THRESHOLDS = {"number": 1.0, "short": 1.0, "medium": 0.9, "long phrase": 0.8}
ARTICLES = frozenset({"a", "an", "the"})
MAX_PARENTHESES = 3  # variants grow as 2**n; a real answer has one or two

# --- reading the response out of a model's output ----------------------------------------------

_MARKUP = re.compile(r"\*\*|__|`")
_MARKER_LINE = re.compile(r"^\W*(?:final\s+|correct\s+)?(?:answer|response)\s*[:：]\s*(?P<rest>.*\S)", re.IGNORECASE)
_LEAD_IN = re.compile(
    r"^(?:so,?\s+|thus,?\s+|therefore,?\s+)?(?:my\s+|the\s+)?(?:final\s+|correct\s+)?(?:answer|response)\s+is\s*:?\s*",
    re.IGNORECASE,
)
_JEOPARDY_PHRASING = re.compile(
    r"^(?:what|who|where|when|which|whom)(?:\s*(?:'|’)s\s+|\s+(?:is|are|was|were)\s+)", re.IGNORECASE
)
_TRAILING = re.compile(r"[\s?.!:;\"'“”‘’]+$")
_LEADING = re.compile(r"^[\s\"'“”‘’]+")


def extract_response(output: str) -> str:
    """The response a model's output gives: the text after its last "Answer:" line, else its
    last non-empty line; lead-ins ("the answer is"), the Jeopardy phrasing and trailing
    punctuation taken off."""
    lines = [line.strip() for line in _MARKUP.sub(" ", output).splitlines() if line.strip()]
    if not lines:
        return ""
    marked = [m.group("rest") for line in lines if (m := _MARKER_LINE.match(line))]
    response = marked[-1] if marked else lines[-1]
    response = _LEADING.sub("", _LEAD_IN.sub("", response))
    response = _JEOPARDY_PHRASING.sub("", response, count=1)
    return _TRAILING.sub("", response)


# --- normal forms ----------------------------------------------------------------------------

_DROPPED = re.compile(r"(?<=\w)['’](?=\w)|(?<=[A-Za-z])\.(?=[A-Za-z])|(?<=\d)[,.](?=\d{3}\b)")
_NOT_WORD = re.compile(r"[^\w.]+|_|(?<!\d)\.|\.(?!\d)")


def basic_form(text: str) -> str:
    """Lower case, accents off, "&" as "and", apostrophes and abbreviation dots dropped
    ("Ohm's", "U.S.A."), thousands separators dropped, other punctuation a space."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold().replace("&", " and ")
    return " ".join(_NOT_WORD.sub(" ", _DROPPED.sub("", plain)).split())


_UNITS = {
    word: value
    for value, word in enumerate(
        [
            *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven"),
            *("twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"),
        ]
    )
}
_TENS = {
    word: 10 * (i + 2)
    for i, word in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"))
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
    "fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
    "nineteenth": 19, "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50,
    "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90, "hundredth": 100,
}  # fmt: skip
_NUMBER_WORDS = _UNITS.keys() | _TENS.keys() | _SCALES.keys()


def _ordinal_suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def numerals(form: str) -> str:
    """Number words as digits in a basic form: "twenty one" is "21", "fourth" is "4th",
    "one hundred and five" is "105", a year read in pairs ("eighteen twelve") "1812".
    "second" alone stays a word (a unit of time, too)."""
    words, out, i = form.split(), [], 0
    while i < len(words):
        j, total, current = i, 0, 0
        while j < len(words) and (step := _number_step(words, j, i, current)) is not None:
            total, current = (total + step[0], step[1]) if step[0] else (total, step[1])
            j += 1
        ordinal = words[j] if j < len(words) else ""
        if ordinal in _ORDINALS and (_takes_unit(current, _ORDINALS[ordinal]) if j > i else ordinal != "second"):
            value = total + current + _ORDINALS[ordinal]
            out.append(f"{value}{_ordinal_suffix(value)}")
            i = j + 1
        elif j > i:
            out.append(str(total + current))
            i = j
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def _number_step(words: list[str], j: int, start: int, current: int) -> tuple[int, int] | None:
    """How word ``j`` continues the number begun at ``start``: (what moves to the total, the
    new current group), or None where the number ends."""
    word = words[j]
    value = _UNITS.get(word, _TENS.get(word))
    if value is not None:
        if j == start or current == 0 or _takes_unit(current, value):
            return 0, current + value
        if 10 <= current < 100 and value >= 10:  # "nineteen eighty", "twenty twenty": a year
            return 0, current * 100 + value
        return None
    if word in _SCALES and j > start:
        scale = _SCALES[word]
        return (0, current * scale) if scale == 100 else (current * scale, 0)
    if word == "and" and j > start and j + 1 < len(words) and words[j + 1] in _NUMBER_WORDS | _ORDINALS.keys():
        return 0, current  # "one hundred and five"
    return None


def _takes_unit(current: int, value: int) -> bool:
    """ "twenty" takes "one" (21), "nineteen eighty" takes "four" (1984); "five" takes nothing."""
    return (value < 10 and current >= 20 and current % 10 == 0) or (current > 0 and current % 100 == 0 and value < 100)


def _without_articles(form: str) -> str:
    words = [word for word in form.split() if word not in ARTICLES]
    return " ".join(words) if words else form  # "The The", the band, stays itself


def jeopardy_form(text: str) -> str:
    return numerals(_without_articles(basic_form(text)))


_PARENTHESISED = re.compile(r"\(([^()]*)\)|\[([^\[\]]*)\]")


def optional_parts(text: str, *, alternatives: bool) -> set[str]:
    """The readings of a text whose parenthesised parts are optional: each part kept or left
    out, and (``alternatives``) a part that ends the text also standing alone, as J-Archive
    writes an accepted alternative: "the hare (jackrabbit)", "Kyiv (or Kiev)"."""
    parts = list(_PARENTHESISED.finditer(text))[:MAX_PARENTHESES]
    readings = set()
    for keep in product((True, False), repeat=len(parts)):
        pieces, last = [], 0
        for part, kept in zip(parts, keep, strict=True):
            pieces.append(text[last : part.start()])
            if kept:
                pieces.append(f" {part.group(1) or part.group(2) or ''} ")
            last = part.end()
        pieces.append(text[last:])
        readings.add("".join(pieces))
    if alternatives and parts and not text[parts[-1].end() :].strip():
        alone = parts[-1].group(1) or parts[-1].group(2) or ""
        readings.add(re.sub(r"^\s*(?:or|aka|a\.k\.a\.)\s+", "", alone, flags=re.IGNORECASE))
    return readings


# --- verdicts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """How a response compared with the expected answers, for the answer artifact."""

    mode: str
    correct: bool
    similarity: float  # the best pair's, in [0, 1]
    threshold: float
    answer_type: str  # adaptive and jeopardy: which threshold applied ("number", "short", ...)
    response_forms: list[str] = field(default_factory=list)
    expected_forms: list[str] = field(default_factory=list)
    matched: str = ""  # the expected form the response matched (or came nearest to)
    reason: str = ""

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "correct": self.correct,
            "similarity": self.similarity,
            "threshold": self.threshold,
            "answer_type": self.answer_type,
            "response_forms": self.response_forms,
            "expected_forms": self.expected_forms,
            "matched": self.matched,
            "reason": self.reason,
        }


def answer_type(expected_form: str) -> str:
    """What kind of answer a (basic or Jeopardy) form is, for the adaptive threshold: a
    number (a year, "4th", "21 guns"), a short name, or a medium or long phrase."""
    words = numerals(expected_form).split()
    if any(c.isdigit() for c in expected_form + " ".join(words)) and (
        len(words) <= SHORT_WORDS or all(any(c.isdigit() for c in w) for w in words)
    ):
        return "number"
    if len(expected_form) <= SHORT_CHARS and len(words) <= SHORT_WORDS:
        return "short"
    return "medium" if len(expected_form) <= MEDIUM_CHARS else "long phrase"


def similarity(a: str, b: str) -> float:
    """rapidfuzz's normalised Indel similarity of two forms, in [0, 1]."""
    return round(fuzz.ratio(a, b) / 100, 4)


def grade(response: str, expected: list[str], mode: str) -> Verdict:
    """``response`` (as ``extract_response`` read it) against the expected answer and its
    aliases, in ``mode``."""
    if mode == "jeopardy":
        responses = _forms(optional_parts(response, alternatives=False), jeopardy_form)
        golds = _forms((r for e in expected for r in optional_parts(e, alternatives=True)), jeopardy_form)
    else:
        responses, golds = _forms([response], basic_form), _forms(expected, basic_form)
    if not responses:
        return Verdict(mode, False, 0.0, 1.0, "", [], golds, reason="no answer in the output")
    # The nearest pair; an exact one first, so the verdict names the form that matched.
    score, response_form, gold = max(
        ((similarity(r, g), r, g) for r in responses for g in golds), key=lambda t: (t[1] == t[2], t[0])
    )
    kind, threshold = _threshold(mode, gold)
    correct = response_form == gold or (
        mode != "strict" and score >= threshold and _same_numbers(mode, response_form, gold)
    )
    return Verdict(mode, correct, score, threshold, kind, responses, golds, gold)


def _forms(texts: Iterable[str], normalise: Callable[[str], str]) -> list[str]:
    """Distinct non-empty normal forms, in a stable order (the artifact shows them)."""
    return sorted({form for text in texts if (form := normalise(text))})


def _threshold(mode: str, gold: str) -> tuple[str, float]:
    if mode == "strict":
        return "", 1.0
    if mode == "lenient":
        return "", LENIENT_THRESHOLD
    kind = answer_type(gold)
    return kind, THRESHOLDS[kind]


def _same_numbers(mode: str, response: str, gold: str) -> bool:
    """Lenient mode aside, a response near a phrase with numbers in it must have the same
    numbers: "the War of 1812" is not "the War of 1813", however similar the strings."""
    if mode == "lenient":
        return True
    return re.findall(r"\d+", numerals(response)) == re.findall(r"\d+", numerals(gold))
