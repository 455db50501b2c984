"""People's names as a Jeopardy judge reads them: a surname suffices ("Melville"), and so do
the names with fewer or more given names or initials ("Percy Shelley", "John Q. Adams",
"Thomas A. Edison"), unless the response may mean, or does mean, someone else: a surname that
several well-known people share ("Roosevelt"), another given name ("Mary Shelley"), or a
namesake told apart only by a middle name or a suffix ("John Adams" is not John Quincy
Adams, "Dumas fils" not Dumas père).

Which names are ambiguous is what a judge knows, not something the strings say: the two lists
below hold the cases quiz clues meet most (presidents, literary families, composers), and a
surname missing from them is taken as enough. Pure functions on basic forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz

# Surnames that more than one person, about equally well known in one field, shares: the
# surname alone does not say which ("Who is Roosevelt?" - "Which one?").
AMBIGUOUS_SURNAMES = frozenset(
    {
        *("adams", "harrison", "johnson", "roosevelt", "bush"),  # two presidents each
        *("bronte", "dumas"),  # the Brontë sisters; père and fils
        *("pitt", "strauss", "scarlatti", "bruegel", "brueghel", "holbein"),  # elder and younger
    }
)
# A given name and surname that several well-known people share, told apart by their middle
# initials: "George Bush" means neither 41 (H. W.) nor 43 (W.) for sure.
NAMESAKES = {
    ("john", "adams"): ("", "q"),
    ("george", "bush"): ("hw", "w"),
    ("oliver", "holmes"): ("w",),
}
# Words that end a name without being its surname; two people may differ by them alone.
SUFFIXES = frozenset({"jr", "sr", "junior", "senior", "pere", "fils", "elder", "younger"})
PARTICLES = frozenset({"van", "von", "de", "da", "di", "du", "del", "della", "der", "den", "la", "le", "bin", "ibn"})
# The first word of a place, not of a person ("West Virginia", "San Francisco", "Lake Victoria").
PLACE_FIRST_WORDS = frozenset(
    {
        *("new", "north", "south", "east", "west", "northern", "southern", "eastern", "western", "central"),
        *("san", "santa", "saint", "st", "los", "las", "el", "fort", "port", "cape", "lake", "mount", "mt"),
        *("great", "upper", "lower", "united", "republic", "sierra", "rio", "costa", "puerto", "sri", "hong"),
    }
)
# The last word of a thing, not of a person ("Victoria Falls", "Louisiana Purchase").
THING_LAST_WORDS = frozenset(
    {
        *("river", "lake", "island", "islands", "ocean", "sea", "mountain", "mountains", "falls", "bay", "canal"),
        *("city", "county", "state", "states", "republic", "kingdom", "empire", "war", "purchase", "treaty", "act"),
        *("bridge", "tower", "building", "park", "street", "avenue", "square", "company", "university", "college"),
        *("church", "cathedral", "palace", "castle", "museum", "station", "airport", "penguin", "penguins"),
    }
)
# A clue about a person says he or she; a clue about a thing says which thing it wants.
_PERSON_CLUE = re.compile(r"\b(?:he|she|his|her|him|himself|herself|who)\b", re.IGNORECASE)
_THING_CLUE = re.compile(
    r"\b(?:this|these|its)\s+(?:[\w'-]+\s+){0,2}?(?:state|country|nation|city|capital|town|island|river|lake|sea|"
    r"ocean|mountain|volcano|film|movie|novel|book|play|opera|song|album|ship|liner|company|war|battle|treaty|"
    r"element|planet|language|landmark|building|region|province|continent)s?\b",
    re.IGNORECASE,
)
_INITIALS = re.compile(r"^(?:[A-Z]\.?){1,3}$")
FIRST_NAME_SIMILARITY = 0.7  # "Mohammed" is "Muhammad" misspelt; "Mary" is not "Percy"


@dataclass(frozen=True)
class Name:
    given: tuple[str, ...]  # basic-form words before the surname: "percy", "bysshe"; "h", "w"
    surname: tuple[str, ...]  # with its particles: ("van", "gogh")
    suffix: tuple[str, ...] = ()  # "jr", "pere", "3" (a regnal number)


def person_name(text: str, form: str, clue: str) -> Name | None:
    """The name ``text`` (an expected answer as written, capitals and all) spells, when it
    looks like a person's and the clue does not ask for a place or a thing; ``form`` is its
    normal form (titles already off)."""
    words = [w for w in text.split() if any(c.isalnum() for c in w)]
    if not 2 <= len(words) <= 6 or not all(_name_word(w) for w in words):
        return None
    name = split_name(form.split())
    if name is None or not name.given or name.given[0] in PLACE_FIRST_WORDS or name.surname[-1] in THING_LAST_WORDS:
        return None
    if clue and not _PERSON_CLUE.search(clue) and _THING_CLUE.search(clue):
        return None
    return name


def split_name(words: list[str]) -> Name | None:
    """Given names, surname (with particles) and suffixes of a name's basic-form words."""
    end = len(words)
    while end > 1 and (words[end - 1] in SUFFIXES or words[end - 1].isdigit()):
        end -= 1
    if not end:
        return None
    start = end - 1
    while start > 0 and words[start - 1] in PARTICLES:
        start -= 1
    return Name(tuple(words[:start]), tuple(words[start:end]), tuple(words[end:]))


def compare(response_words: list[str], expected: Name, expected_suffixes: set[str]) -> tuple[bool | None, str]:
    """(True, why) when the response names the expected person the way a judge accepts,
    (False, why) when it names someone else or cannot say whom, (None, "") when it does not
    end with the person's surname (another rule may still take it: an alias, a misspelling)."""
    response = split_name(response_words)
    if response is None or not _same_surname(response.surname, expected.surname):
        return None, ""
    if not set(response.suffix) <= expected_suffixes:
        return False, f"names another person: {' '.join(response.suffix)} is not the one asked for"
    given = _expand_initials(list(response.given), expected.given)
    if not given:
        surname = expected.surname[-1]
        if surname in AMBIGUOUS_SURNAMES:
            return False, f"ambiguous: more than one well-known {surname.title()}"
        return True, "a person's surname"
    if not _first_name_fits(given, expected.given):
        return False, f"names another person: {given[0].title()} {' '.join(expected.surname).title()}"
    namesakes = NAMESAKES.get((expected.given[0], surname := expected.surname[-1]))
    if namesakes and _middle_initials(given) != _middle_initials(list(expected.given)):
        return False, f"ambiguous: several well-known {expected.given[0].title()} {surname.title()}s"
    return True, "a person's name with fewer or other given names"


def _name_word(word: str) -> bool:
    plain = word.strip(",.\"'()")
    return bool(plain) and (
        plain[0].isupper() or plain.lower() in PARTICLES or bool(_INITIALS.match(plain)) or plain.isdigit()
    )


def _same_surname(response: tuple[str, ...], expected: tuple[str, ...]) -> bool:
    """The same surname, its particles optional ("Van Gogh", "Gogh"), one slip allowed in a
    long one ("Melvile", "Hemmingway"; not "Tyler" for "Taylor")."""
    core = [w for w in response if w not in PARTICLES]
    wanted = [w for w in expected if w not in PARTICLES]
    if core == wanted:
        return True
    joined, target = " ".join(core), " ".join(wanted)
    return len(target) >= 7 and joined[:1] == target[:1] and fuzz.ratio(joined, target) / 100 >= 1 - 1 / len(target)


def _expand_initials(given: list[str], expected: tuple[str, ...]) -> list[str]:
    """ "js" (J.S. Bach, its dots gone) read as the initials "j", "s" where the expected
    given names start with those letters."""
    out: list[str] = []
    for word in given:
        initials = "".join(w[0] for w in expected)
        if 2 <= len(word) <= 3 and word in initials and word not in expected:
            out.extend(word)
        else:
            out.append(word)
    return out


def _first_name_fits(given: list[str], expected: tuple[str, ...]) -> bool:
    """The response's given names start with the expected first name (or its initial, or a
    misspelling of it), or are some of the expected given names in order ("Graham Bell")."""
    if _fits(given[0], expected[0]):
        return True
    position = 0
    for word in given:
        while position < len(expected) and not _fits(word, expected[position]):
            position += 1
        if position == len(expected):
            return False
        position += 1
    return True


def _fits(word: str, expected: str) -> bool:
    if len(word) == 1:
        return expected.startswith(word)
    return fuzz.ratio(word, expected) / 100 >= FIRST_NAME_SIMILARITY


def _middle_initials(given: list[str]) -> str:
    return "".join(w[0] for w in given[1:])
