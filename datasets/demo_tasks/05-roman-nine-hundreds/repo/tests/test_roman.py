import pytest

from roman import from_roman, to_roman


@pytest.mark.parametrize(
    "number, expected",
    [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"), (90, "XC"), (400, "CD")],
)
def test_to_roman_small_numbers(number, expected):
    assert to_roman(number) == expected


def test_to_roman_nine_hundred():
    assert to_roman(900) == "CM"
    assert to_roman(949) == "CMXLIX"


def test_to_roman_years():
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(2024) == "MMXXIV"
    assert to_roman(3999) == "MMMCMXCIX"


@pytest.mark.parametrize("bad", [0, -1, 4000])
def test_to_roman_out_of_range(bad):
    with pytest.raises(ValueError):
        to_roman(bad)


def test_to_roman_rejects_non_int():
    with pytest.raises(TypeError):
        to_roman(3.0)


def test_from_roman():
    assert from_roman("MCMXCIV") == 1994
    assert from_roman("  xlii ") == 42


@pytest.mark.parametrize("bad", ["", "IIII", "VV", "IC", "ABC"])
def test_from_roman_invalid(bad):
    with pytest.raises(ValueError):
        from_roman(bad)


def test_round_trip_all_numbers():
    for number in range(1, 4000):
        assert from_roman(to_roman(number)) == number
