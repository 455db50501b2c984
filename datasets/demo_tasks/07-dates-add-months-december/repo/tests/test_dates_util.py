from datetime import date

from dates_util import add_months, end_of_month, quarter_of


def test_add_one_month():
    assert add_months(date(2023, 3, 15), 1) == date(2023, 4, 15)


def test_add_months_across_year_boundary():
    assert add_months(date(2023, 11, 15), 2) == date(2024, 1, 15)
    assert add_months(date(2023, 6, 1), 18) == date(2024, 12, 1)


def test_add_months_into_december():
    assert add_months(date(2023, 11, 15), 1) == date(2023, 12, 15)


def test_subtract_months_into_december():
    assert add_months(date(2024, 1, 10), -1) == date(2023, 12, 10)
    assert add_months(date(2024, 3, 31), -3) == date(2023, 12, 31)


def test_adding_zero_months_is_identity():
    for month in range(1, 13):
        day = date(2023, month, 1)
        assert add_months(day, 0) == day


def test_clamps_to_end_of_month():
    assert add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert add_months(date(2023, 1, 31), 1) == date(2023, 2, 28)


def test_end_of_month():
    assert end_of_month(date(2024, 2, 10)) == date(2024, 2, 29)
    assert end_of_month(date(2023, 12, 31)) == date(2023, 12, 31)


def test_quarter_of():
    assert [quarter_of(date(2023, m, 1)) for m in (1, 3, 4, 9, 10, 12)] == [1, 1, 2, 3, 4, 4]
