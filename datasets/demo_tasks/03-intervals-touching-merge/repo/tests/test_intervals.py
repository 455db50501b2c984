import pytest

from intervals import contains, merge_intervals, total_length


def test_empty_input():
    assert merge_intervals([]) == []


def test_disjoint_intervals_are_sorted():
    assert merge_intervals([(5, 6), (1, 2)]) == [(1, 2), (5, 6)]


def test_overlapping_intervals_merge():
    assert merge_intervals([(1, 4), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]


def test_nested_interval_is_absorbed():
    assert merge_intervals([(1, 10), (2, 3)]) == [(1, 10)]


def test_touching_intervals_merge():
    assert merge_intervals([(1, 3), (3, 5)]) == [(1, 5)]
    assert merge_intervals([(0, 0), (0, 2)]) == [(0, 2)]


def test_docstring_example():
    assert merge_intervals([(5, 7), (1, 2), (2, 4)]) == [(1, 4), (5, 7)]


def test_invalid_interval_rejected():
    with pytest.raises(ValueError):
        merge_intervals([(3, 1)])


def test_total_length_counts_overlap_once():
    assert total_length([(0, 2), (1, 3), (5, 6)]) == 4


def test_contains_includes_endpoints():
    assert contains([(1, 3)], 1)
    assert contains([(1, 3)], 3)
    assert not contains([(1, 3)], 3.5)
