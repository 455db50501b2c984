import pytest

from text_wrap import fill, wrap

SENTENCE = "the quick brown fox jumps over the lazy dog and keeps on running"


def test_empty_text():
    assert wrap("") == []
    assert wrap("   \n ") == []


def test_short_text_is_one_line():
    assert wrap("hello world", 80) == ["hello world"]


def test_wraps_on_word_boundaries():
    assert wrap("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]


def test_line_may_be_exactly_width():
    assert wrap("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]


def test_whitespace_is_collapsed():
    assert wrap("a   b\n\tc", 80) == ["a b c"]


def test_long_words_are_split():
    assert wrap("abcdefghij xy", 5) == ["abcde", "fghij", "xy"]


@pytest.mark.parametrize("width", range(7, 40))
def test_lines_are_greedy_and_within_width(width):
    lines = wrap(SENTENCE, width)
    assert " ".join(lines) == SENTENCE
    assert all(len(line) <= width for line in lines)
    for line, following in zip(lines, lines[1:]):
        assert len(line) + 1 + len(following.split()[0]) > width


def test_fill_joins_lines():
    assert fill("one two three", 7) == "one two\nthree"


def test_invalid_width():
    with pytest.raises(ValueError):
        wrap("text", 0)
