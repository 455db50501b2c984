"""A small git repository with a real bug-fix history, for tests, benchmarks and the demo.

``build_testbed(path)`` writes "textkit" (three modules, their tests) and commits, oldest
first: three bug fixes that each come with a regression test (what ``ingest_prs`` keeps),
a README change and a test-only change (no candidates), and a refactor whose new test
already passed (rejected: its patch turns no test green). With ``flaky_counter`` it adds a
fix whose test passes on odd runs only, counted in that file (quarantined).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BASE = {
    "textkit/__init__.py": '"""Small text utilities."""\n',
    "textkit/words.py": '''def count_words(text):
    """How many words the text holds."""
    return len([word for word in text.split(" ") if word])
''',
    "textkit/slug.py": '''import re


def slugify(text):
    """A URL-safe slug: lower case, runs of other characters become one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower())
''',
    "textkit/duration.py": '''import re

UNITS = {"h": 3600, "m": 3600, "s": 1}


def parse_duration(text):
    """Seconds in a duration such as "1h30m" or "45s"."""
    return sum(int(amount) * UNITS[unit] for amount, unit in re.findall(r"(\\d+)([hms])", text))
''',
    "tests/__init__.py": "",
    "tests/test_words.py": """from textkit.words import count_words


def test_counts_words_between_spaces():
    assert count_words("one two  three") == 3
""",
    "tests/test_slug.py": """from textkit.slug import slugify


def test_lower_cases():
    assert slugify("Abc") == "abc"
""",
    "tests/test_duration.py": """from textkit.duration import parse_duration


def test_hours():
    assert parse_duration("2h") == 7200


def test_seconds():
    assert parse_duration("45s") == 45
""",
}

WORD_TESTS = (
    BASE["tests/test_words.py"]
    + """

def test_counts_words_across_newlines():
    assert count_words("one\\ntwo\\tthree") == 3
"""
)
SLUG_TESTS = (
    BASE["tests/test_slug.py"]
    + """

def test_no_dash_at_either_end():
    assert slugify("Hello, World!") == "hello-world"
"""
)

# (message, {path: new content}) oldest first, applied on top of BASE.
HISTORY: list[tuple[str, dict[str, str]]] = [
    (
        "Count words across newlines\n\ncount_words('one\\ntwo') returns 1: it splits on spaces only, "
        "so words separated by a newline or a tab are counted as one.",
        {
            "textkit/words.py": BASE["textkit/words.py"].replace(
                'len([word for word in text.split(" ") if word])', "len(text.split())"
            ),
            "tests/test_words.py": BASE["tests/test_words.py"]
            + """

def test_counts_words_across_newlines():
    assert count_words("one\\ntwo\\tthree") == 3
""",
        },
    ),
    ("Describe textkit in a README", {"README.md": "# textkit\n\nWords, slugs and durations.\n"}),
    (
        "Strip dashes at the ends of slugs\n\nslugify('Hello, World!') gives 'hello-world-': punctuation at "
        "either end of the text leaves a dash behind.",
        {
            "textkit/slug.py": BASE["textkit/slug.py"].replace("text.lower())", 'text.lower()).strip("-")'),
            "tests/test_slug.py": BASE["tests/test_slug.py"]
            + """

def test_no_dash_at_either_end():
    assert slugify("Hello, World!") == "hello-world"
""",
        },
    ),
    (
        "parse_duration counts minutes as hours\n\nparse_duration('1h30m') returns 111600 instead of 5400.",
        {
            "textkit/duration.py": BASE["textkit/duration.py"].replace('"m": 3600', '"m": 60'),
            "tests/test_duration.py": BASE["tests/test_duration.py"]
            + """

def test_minutes():
    assert parse_duration("1h30m") == 5400
""",
        },
    ),
    (
        "Test slugs of digits",
        {"tests/test_slug.py": SLUG_TESTS + '\n\ndef test_keeps_digits():\n    assert slugify("Top 10") == "top-10"\n'},
    ),
    (
        "Name the word splitter\n\nA comment on why split() takes no argument.",
        {
            "textkit/words.py": '''def count_words(text):
    """How many words the text holds."""
    # split() with no argument splits on any run of whitespace.
    return len(text.split())
''',
            "tests/test_words.py": WORD_TESTS
            + '\n\ndef test_empty_text_has_no_words():\n    assert count_words("") == 0\n',
        },
    ),
]


KEPT_SUBJECTS = (
    "Count words across newlines",
    "Strip dashes at the ends of slugs",
    "parse_duration counts minutes as hours",
)
FLAKY_SUBJECT = "Round durations to whole minutes"


def _flaky_fix(counter: Path) -> tuple[str, dict[str, str]]:
    """A real fix and its test, plus a test that passes on odd runs only (counted in a file
    outside the checkout, so the count survives the fresh checkout of each run)."""
    return (
        f"{FLAKY_SUBJECT}\n\nThere is no way to round a duration to minutes.",
        {
            "textkit/rounding.py": '''def round_to_minutes(seconds):
    """Seconds rounded to the nearest whole minute, in seconds."""
    return round(seconds / 60) * 60
''',
            "tests/test_rounding.py": f"""from pathlib import Path

from textkit.rounding import round_to_minutes

COUNTER = Path({str(counter)!r})


def test_rounds_to_nearest_minute():
    assert round_to_minutes(89) == 60


def test_sometimes():
    runs = int(COUNTER.read_text()) + 1
    COUNTER.write_text(str(runs))
    assert runs % 2 == 1
""",
        },
    )


def build_testbed(path: Path, flaky_counter: Path | None = None) -> Path:
    """Create the repository at ``path`` (a new directory); returns it. ``flaky_counter`` is
    created for every sandbox user to write (each validation may run as another uid); its
    directory must be one they can reach, not hidden from them (so not under VAR_DIR)."""
    if flaky_counter:
        flaky_counter.write_text("0")
        flaky_counter.chmod(0o666)
    path.mkdir(parents=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    _commit(path, "Start textkit", BASE, 0)
    history = [*HISTORY, _flaky_fix(flaky_counter)] if flaky_counter else HISTORY
    for day, (message, files) in enumerate(history, start=1):
        _commit(path, message, files, day)
    return path


def _commit(path: Path, message: str, files: dict[str, str], day: int) -> None:
    for relative, content in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    _git(path, "add", "--all")
    date = f"2026-01-{day + 1:02d}T12:00:00+00:00"
    _git(path, "commit", "--quiet", "-m", message, env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})


def _git(path: Path, *args: str, env: dict[str, str] | None = None) -> None:
    identity = {
        "GIT_AUTHOR_NAME": "Textkit Maintainer",
        "GIT_AUTHOR_EMAIL": "maintainer@example.com",
        "GIT_COMMITTER_NAME": "Textkit Maintainer",
        "GIT_COMMITTER_EMAIL": "maintainer@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(path),
    }
    subprocess.run(["git", *args], cwd=path, check=True, env={**os.environ, **identity, **(env or {})})
