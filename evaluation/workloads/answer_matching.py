"""Short answers compared the way a quiz judge compares them: normalised forms, Jeopardy's
conventions, and fuzzy similarity (rapidfuzz) with a threshold that depends on the answer.

The modes (an experiment's ``grading``):

- ``strict``: the normalised forms are equal (case, accents, punctuation, spacing ignored).
- ``lenient``: fuzzy similarity of the normalised forms of at least ``LENIENT_THRESHOLD``.
- ``adaptive``: the threshold depends on the expected answer: numbers (digits or number
  words) and short names must match exactly, medium answers nearly, long phrases loosely.
- ``jeopardy``: as a Jeopardy judge rules on a response (see ``judge``): articles, titles,
  ship prefixes and generic heads ("Mount", "River") ignored, a parenthesised part optional
  ("(Dwyane) Wade" takes "Wade"; "the hare (jackrabbit)" takes "hare" and "jackrabbit"),
  numbers as digits, words or Roman numerals, singular or plural, dates in any common form, a
  person's surname unless ambiguous (person_names.py), extra words that the clue gives or
  that follow the response as an explanation, and a slip of spelling in a longer answer;
  never two answers at once, another person of the same surname or another number.

Every mode reads the response inside its Jeopardy phrasing ("What is ...?", "Who are ...?"),
after an "Answer:" marker and without the hedges around it ("I believe it's ..."): the
default prompt asks for that phrasing, so refusing it in strict mode would grade the format,
not the answer. Pure functions, no database. ``tests/data/grading/`` holds the labelled set
the jeopardy mode was tuned against (bench/grading_agreement.py prints the agreement).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from itertools import product

from dateutil import parser as date_parser
from rapidfuzz import fuzz

from evaluation.workloads import person_names

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
# A hedge or a filler before the response: "I believe it's ...", "Probably ...", "It's ...".
_HEDGE = re.compile(
    r"^(?:i\s+(?:believe|think|guess|suspect|would\s+say)|i(?:'|’)d\s+say|probably|perhaps|maybe|most\s+likely"
    r"|my\s+(?:best\s+)?guess\s+is|i(?:'|’)m\s+(?:fairly\s+|pretty\s+|quite\s+)?(?:sure|confident)|hmm+|well|ok(?:ay)?"
    r")\b[\s,:]*(?:that\s+)?|^(?:it|this|that)(?:\s*(?:'|’)s\s+|\s+(?:is|was|would\s+be|must\s+be|should\s+be)\s+)",
    re.IGNORECASE,
)
_JEOPARDY_PHRASING = re.compile(
    r"^(?:what|who|where|when|which|whom)(?:\s*(?:'|’)s\s+|\s+(?:is|are|was|were)\s+)", re.IGNORECASE
)
# Words after a response that offer another one: "Van Gogh? Or possibly Gauguin."
_ANOTHER_ANSWER = re.compile(
    r"^\W*(?:or|nor|maybe|perhaps|possibly|alternatively|then\s+again|unless|either|otherwise|actually|no\b)\b",
    re.IGNORECASE,
)
_TRAILING = re.compile(r"[\s?.!:;\"'“”‘’]+$")
_LEADING = re.compile(r"^[\s\"'“”‘’]+")
MAX_LEAD_INS = 4


def extract_response(output: str) -> str:
    """The response a model's output gives: the text after its last "Answer:" line, else its
    last line phrased as a Jeopardy response, else its last non-empty line; lead-ins ("the
    answer is"), hedges, the Jeopardy phrasing, a sentence after the response's question
    mark (unless it offers another answer) and trailing punctuation taken off."""
    lines = [line.strip() for line in _MARKUP.sub(" ", output).splitlines() if line.strip()]
    if not lines:
        return ""
    marked = [m.group("rest") for line in lines if (m := _MARKER_LINE.match(line))]
    phrased = [line for line in lines if _JEOPARDY_PHRASING.match(_without_lead_ins(line))]
    response = _without_lead_ins((marked or phrased or lines)[-1])
    response = _JEOPARDY_PHRASING.sub("", response, count=1)
    question, mark, after = response.partition("? ")
    if mark and not _ANOTHER_ANSWER.match(after):
        response = question
    return _TRAILING.sub("", response)


def _without_lead_ins(line: str) -> str:
    for _ in range(MAX_LEAD_INS):
        shorter = _HEDGE.sub("", _LEAD_IN.sub("", _LEADING.sub("", line), count=1), count=1)
        if shorter == line or not shorter.strip():
            break
        line = shorter
    return _LEADING.sub("", line)


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
    if word in _SCALES:  # "a hundred" (its article gone) is 100
        scale, base = _SCALES[word], current if j > start else 1
        return (0, base * scale) if scale == 100 else (base * scale, 0)
    following = words[j + 1] if j + 1 < len(words) else ""
    if word in ("oh", "o") and 10 <= current < 100 and 0 < _UNITS.get(following, 0) < 10:
        return 0, current * 100  # "nineteen oh five": 1905
    if word == "and" and j > start and j + 1 < len(words) and words[j + 1] in _NUMBER_WORDS | _ORDINALS.keys():
        return 0, current  # "one hundred and five"
    return None


def _takes_unit(current: int, value: int) -> bool:
    """ "twenty" takes "one" (21), "nineteen eighty" takes "four" (1984); "five" takes nothing."""
    return (value < 10 and current >= 20 and current % 10 == 0) or (current > 0 and current % 100 == 0 and value < 100)


def _without_articles(form: str) -> str:
    words = [word for word in form.split() if word not in ARTICLES]
    return " ".join(words) if words else form  # "The The", the band, stays itself


# Words a Jeopardy judge does not need: a title before a name, a ship's prefix, a generic
# head before or after a name ("Mount Everest", "the Nile River"), a company's legal suffix,
# a unit after a number. Each only where a word is left.
TITLES = frozenset(
    {
        *("dr", "doctor", "mr", "mrs", "ms", "madame", "madam", "mme", "sir", "dame", "lord", "lady", "king", "queen"),
        *("president", "general", "captain", "prince", "princess", "emperor", "empress", "pope", "professor"),
    }
)
SHIP_PREFIXES = frozenset({"rms", "hms", "uss", "ss", "hmhs", "hmas", "usns", "mv"})
LEADING_HEADS = frozenset({"mount", "lake"})
TRAILING_HEADS = frozenset({"river", "ocean", "island", "isle", "mountain", "mountains", "lake", "volcano", "desert"})
COMPANY_SUFFIXES = frozenset({"inc", "incorporated", "corp", "corporation", "co", "ltd", "llc", "plc"})
UNITS = frozenset({"f", "c", "degree", "degrees", "percent"})
ABBREVIATIONS = {"st": "saint", "mt": "mount", "ft": "fort"}
_ROMAN = re.compile(r"^(x{0,3})(ix|iv|v?i{0,3})$")  # up to 39: regnal numbers, "World War II"
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10}
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")


# Cached: a judgement compares every reading with every expected answer, and the mock's
# distractor check grades a dozen candidates against the same answers in every mode.
@functools.lru_cache(maxsize=8192)
def jeopardy_form(text: str) -> str:
    """The form a Jeopardy judge compares: articles, ship prefixes, generic heads, company
    suffixes and units off (a title is optional on one side only: ``without_title``); numbers
    as digits (words, ordinals, Roman numerals after a name: "Henry the Eighth" and "Henry
    VIII" are both "henry 8")."""
    words = [ABBREVIATIONS.get(w, w) for w in numerals(_without_articles(basic_form(text))).split()]
    words = [_roman_value(w) if i else w for i, w in enumerate(words)]
    words = [_ORDINAL.sub(r"\1", w) for w in words]
    words = [w for i, w in enumerate(words) if not (i and w in UNITS and words[i - 1].isdigit())]
    while len(words) > 1 and words[0] in SHIP_PREFIXES | LEADING_HEADS:
        words = words[1:]
    while len(words) > 1 and words[-1] in TRAILING_HEADS | COMPANY_SUFFIXES:
        words = words[:-1]
    return " ".join(words)


def without_title(form: str) -> str:
    """A form without the titles before a name ("King Henry VIII", "Madame Curie"). Never
    taken off both sides of a comparison: "king penguin" and "emperor penguin" are not one."""
    words = form.split()
    while len(words) > 1 and words[0] in TITLES:
        words = words[1:]
    return " ".join(words)


def _roman_value(word: str) -> str:
    if len(word) < 2 or not _ROMAN.match(word):
        return word
    values = [_ROMAN_VALUES[c] for c in word]
    return str(sum(-v if v < nxt else v for v, nxt in zip(values, [*values[1:], 0], strict=True)))


def plural_key(form: str) -> str:
    """A form with singular and plural alike ("bats" and "bat", "Cyclopes" and "Cyclops"):
    each longer word loses a plural "s" or "es" and a final "e"; only for comparing."""
    return " ".join(_singular(word) for word in form.split())


def _singular(word: str) -> str:
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


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


def grade(response: str, expected: list[str], mode: str, clue: str = "") -> Verdict:
    """``response`` (as ``extract_response`` read it) against the expected answer and its
    aliases, in ``mode``; ``clue`` (the question) helps the jeopardy mode only."""
    if mode == "jeopardy":
        return judge(response, expected, clue)
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


# --- the jeopardy mode: a judge's rulings ------------------------------------------------------

MISSPELLING_MIN_CHARS = 7  # a slip in a shorter answer is too often another answer ("Tyler", "Taylor")
# Where an explanation may start after a response: "Everest, the tallest mountain".
_EXPLANATION = re.compile(r",|;|\?\s|:\s|\.\s|\s[-–—]\s|\(|\s(?:which|who|that|because|since|of|in)\s", re.IGNORECASE)
_ALTERNATIVE = re.compile(
    r"\b(?:or|nor|maybe|perhaps|possibly|alternatively|then\s+again|unless|either|otherwise|actually)\b",
    re.IGNORECASE,
)
_CONNECTORS = frozenset({"of", "in", "at", "from", "on", "for", "and"})
_CLUE_STOPWORDS = frozenset({"the", "and", "this", "that", "these", "its", "his", "her", "with", "from", "for", "was"})
CLUE_PREFIX = 5  # "senators" repeats the clue's "Senate", "Brazilian" its "Brazil"
_MONTH_OR_NUMERIC_DATE = re.compile(
    r"\b(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\b|\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Ruling:
    correct: bool
    similarity: float
    threshold: float
    answer_type: str
    response_form: str
    expected_form: str
    reason: str = ""


def judge(response: str, expected: list[str], clue: str = "") -> Verdict:
    """The jeopardy mode: each reading of the response (with its parenthesised parts or
    without, without a trailing explanation) against each reading of each expected answer;
    right when any pair is, and the verdict tells which rule decided."""
    readings = _response_readings(response)
    golds = sorted({reading for answer in expected for reading in optional_parts(answer, alternatives=True)})
    response_forms, expected_forms = _forms(readings, jeopardy_form), _forms(golds, jeopardy_form)
    if not response_forms:
        return Verdict("jeopardy", False, 0.0, 1.0, "", [], expected_forms, reason="no answer in the output")
    clue_words = _clue_words(clue)
    suffixes = {w for form in expected_forms for w in form.split() if w in person_names.SUFFIXES or w.isdigit()}
    rulings = [
        _rule(
            reading,
            gold,
            person_names.person_name(gold, without_title(jeopardy_form(gold)), clue),
            clue_words,
            suffixes,
        )
        for gold in golds
        if jeopardy_form(gold)
        for reading in readings
        if jeopardy_form(reading)
    ]
    # The ruling to show: one that accepts, else one that refused for a reason, else the nearest.
    best = max(rulings, key=lambda r: (r.correct, bool(r.reason), r.similarity, r.expected_form))
    return Verdict(
        "jeopardy",
        best.correct,
        best.similarity,
        best.threshold,
        best.answer_type,
        response_forms,
        expected_forms,
        best.expected_form,
        best.reason,
    )


def _rule(
    reading: str, gold: str, name: person_names.Name | None, clue_words: frozenset[str], suffixes: set[str]
) -> _Ruling:
    form, gold_form = jeopardy_form(reading), jeopardy_form(gold)
    kind, threshold = _jeopardy_threshold(gold_form)
    score = similarity(plural_key(form), plural_key(gold_form))

    def ruling(correct: bool, reason: str = "") -> _Ruling:
        return _Ruling(correct, score, threshold, kind, form, gold_form, reason)

    if plural_key(form) == plural_key(gold_form):
        return ruling(True, "" if form == gold_form else "singular and plural alike")
    if plural_key(without_title(form)) == plural_key(gold_form) or plural_key(form) == plural_key(
        without_title(gold_form)
    ):
        return ruling(True, "a title before the name")
    if (same_date := _same_date(reading, gold)) is not None:
        return ruling(same_date, "the same date" if same_date else "another date")
    if name is not None:
        decided, why = person_names.compare(without_title(form).split(), name, suffixes)
        if decided is not None:
            return ruling(decided, why)
    if _same_but_clue_words(reading, form, gold_form, clue_words):
        return ruling(True, "the same answer, with or without the clue's own words")
    if form[:1] == gold_form[:1] and score >= threshold and _same_numbers("jeopardy", form, gold_form):
        return ruling(True, "a slip of spelling")
    return ruling(False)


def _response_readings(response: str) -> list[str]:
    """The response with its parenthesised parts or without, and each part of it before an
    explanation starts ("Everest, the tallest mountain"), unless the rest offers another
    answer ("Alaska, or maybe Texas")."""
    readings = set(optional_parts(response, alternatives=False))
    for separator in _EXPLANATION.finditer(response):
        head, tail = response[: separator.start()], response[separator.start() :]
        if head.strip() and not _ALTERNATIVE.search(tail):
            readings.add(head)
    return sorted(readings)


def _jeopardy_threshold(gold_form: str) -> tuple[str, float]:
    """The adaptive thresholds, but a short answer of 7 characters or more takes one slip of
    spelling ("Canbera", "Mozarella")."""
    kind = answer_type(gold_form)
    if kind == "short" and len(gold_form) >= MISSPELLING_MIN_CHARS:
        return kind, round(1 - 1 / len(gold_form), 4)
    return kind, THRESHOLDS[kind]


@functools.lru_cache(maxsize=1024)
def _clue_words(clue: str) -> frozenset[str]:
    words = numerals(basic_form(clue)).split()
    return frozenset(w[:CLUE_PREFIX] for w in words if len(w) > 2 and w not in _CLUE_STOPWORDS)


def _same_but_clue_words(reading: str, form: str, gold_form: str, clue_words: frozenset[str]) -> bool:
    """The response adds words the clue gives ("9 players", "the planet Mars"), or leaves out
    words of the answer that the clue gives ("the Colossus" for "the Colossus of Rhodes"
    asked "... at the harbor of Rhodes"). Only words written in lower case are taken as
    added: a capitalised one may name something else."""
    if not clue_words:
        return False
    typed_lower = {basic_form(w) for w in re.findall(r"[^\W\d_][\w'’]*", reading) if w.islower()}
    added = _trim([w for w in form.split() if not (w in typed_lower and w[:CLUE_PREFIX] in clue_words)])
    left_out = _trim([w for w in gold_form.split() if w[:CLUE_PREFIX] not in clue_words])
    responses = {plural_key(form), plural_key(" ".join(added))} - {""}
    golds = {plural_key(gold_form)}
    if any(len(w) >= 4 for w in left_out):  # what is left says something ("Colossus"), not "of"
        golds.add(plural_key(" ".join(left_out)))
    return bool(responses & golds)  # the forms as they are differ: the caller compared them first


def _trim(words: list[str]) -> list[str]:
    while words and words[0] in _CONNECTORS:
        words = words[1:]
    while words and words[-1] in _CONNECTORS:
        words = words[:-1]
    return words


def _same_date(reading: str, gold: str) -> bool | None:
    """Whether two full dates are one ("4 July 1776", "7/4/1776", "the Fourth of July,
    1776"), read month first; None when the expected answer is no full date, or the response
    none (a year alone is compared as words)."""
    expected, given = _full_date(gold), _full_date(reading)
    if expected is None or given is None:
        return None
    expected_date, _ = expected
    given_date, two_digit_year = given
    if two_digit_year:  # "6/6/44": the year in the expected one's century
        return (given_date.year % 100, given_date.month, given_date.day) == (
            expected_date.year % 100,
            expected_date.month,
            expected_date.day,
        )
    return given_date == expected_date


@functools.lru_cache(maxsize=4096)
def _full_date(text: str) -> tuple[date, bool] | None:
    words = numerals(" ".join(w for w in text.casefold().split() if w not in ARTICLES))
    if not _MONTH_OR_NUMERIC_DATE.search(words):
        return None
    try:
        # Parsed with two different defaults: a part missing from the text differs between them.
        first = date_parser.parse(words, default=datetime(1, 1, 1))
        second = date_parser.parse(words, default=datetime(2, 2, 2))
    except (ValueError, OverflowError):
        return None
    if first.date() != second.date():
        return None
    return first.date(), bool(re.search(r"(?<![\d/.-])\d{1,2}[/.-]\d{1,2}[/.-]\d{2}\b", words))
