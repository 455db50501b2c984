import pytest

from slugify import slugify


def test_basic_words():
    assert slugify("Hello World") == "hello-world"


def test_accents_are_transliterated():
    assert slugify("Héllo, Wörld!") == "hello-world"


def test_runs_of_punctuation_collapse():
    assert slugify("a -- b__c") == "a-b-c"


def test_custom_separator():
    assert slugify("Hello Big World", separator="_") == "hello_big_world"


def test_leading_and_trailing_junk_removed():
    assert slugify("  --Hello--  ") == "hello"


def test_max_length_truncates():
    assert slugify("hello world", max_length=5) == "hello"


def test_max_length_does_not_leave_trailing_separator():
    assert slugify("hello world", max_length=6) == "hello"


@pytest.mark.parametrize("limit", range(1, 25))
def test_max_length_invariants(limit):
    slug = slugify("The quick brown fox jumps", max_length=limit)
    assert len(slug) <= limit
    assert not slug.startswith("-")
    assert not slug.endswith("-")


def test_invalid_max_length():
    with pytest.raises(ValueError):
        slugify("anything", max_length=0)
