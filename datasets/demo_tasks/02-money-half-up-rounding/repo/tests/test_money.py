import pytest

from money import apply_discount, format_cents, to_cents


def test_whole_amounts():
    assert to_cents("12") == 1200
    assert to_cents(3) == 300


def test_two_decimal_places():
    assert to_cents("19.99") == 1999
    assert to_cents(" 0.10 ") == 10


def test_half_cent_rounds_up():
    assert to_cents("1.005") == 101
    assert to_cents("0.125") == 13
    assert to_cents("2.675") == 268


def test_negative_half_cent_rounds_away_from_zero():
    assert to_cents("-0.125") == -13


@pytest.mark.parametrize("bad", ["abc", "", "NaN", "Infinity"])
def test_invalid_amounts(bad):
    with pytest.raises(ValueError):
        to_cents(bad)


def test_format_cents():
    assert format_cents(123450) == "$1,234.50"
    assert format_cents(-5) == "-$0.05"
    assert format_cents(700, currency="EUR ") == "EUR 7.00"


def test_apply_discount():
    assert apply_discount(1000, 15) == 850
    assert apply_discount(125, 50) == 63


def test_apply_discount_bounds():
    with pytest.raises(ValueError):
        apply_discount(100, 101)
