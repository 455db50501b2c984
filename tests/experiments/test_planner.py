import pytest

from experiments.planner import attempt_order, quotas, sample_tasks

TASKS = list(range(20))


def test_random_sample_is_seeded_and_keeps_dataset_order():
    first = sample_tasks(TASKS, 5, "random", seed=3)
    assert first == sample_tasks(TASKS, 5, "random", seed=3)
    assert first == sorted(first) and len(set(first)) == 5
    assert first != sample_tasks(TASKS, 5, "random", seed=4)


def test_first_strategy_and_full_dataset():
    assert sample_tasks(TASKS, 3, "first", seed=1) == [0, 1, 2]
    assert sample_tasks(TASKS, None, "random", seed=1) == TASKS
    assert sample_tasks(TASKS, 50, "random", seed=1) == TASKS


def test_attempt_order_is_a_seeded_permutation():
    cells = [(t, a) for t in range(6) for a in "xyz"]
    order = attempt_order(cells, 5)
    assert sorted(order) == sorted(cells)
    assert order == attempt_order(cells, 5)
    assert order != cells and order != attempt_order(cells, 6)


# 20 tasks in three categories of 10, 6 and 4, in dataset order.
CATEGORIES = ["history"] * 10 + ["science"] * 6 + ["sport"] * 4
ROWS = list(enumerate(CATEGORIES))


def of(sample: list) -> dict[str, int]:
    return {category: sum(1 for _, c in sample if c == category) for category in sorted(set(CATEGORIES))}


def category(row):
    return row[1]


def test_a_proportional_sample_keeps_each_strata_share():
    sample = sample_tasks(ROWS, 10, "stratified", seed=7, stratum=category, allocation="proportional")
    assert of(sample) == {"history": 5, "science": 3, "sport": 2}
    assert sample == sorted(sample)  # dataset order
    assert sample == sample_tasks(ROWS, 10, "stratified", seed=7, stratum=category)
    assert sample != sample_tasks(ROWS, 10, "stratified", seed=8, stratum=category)


def test_an_equal_sample_takes_as_many_from_each_stratum_as_it_can():
    assert of(sample_tasks(ROWS, 9, "stratified", seed=1, stratum=category, allocation="equal")) == {
        "history": 3,
        "science": 3,
        "sport": 3,
    }
    # sport has only 4: the rest is shared between the others.
    assert of(sample_tasks(ROWS, 16, "stratified", seed=1, stratum=category, allocation="equal")) == {
        "history": 6,
        "science": 6,
        "sport": 4,
    }


@pytest.mark.parametrize("allocation", ["proportional", "equal"])
@pytest.mark.parametrize("size", range(1, 20))
def test_quotas_always_add_up_and_never_exceed_a_stratum(size, allocation):
    given = quotas([10, 6, 4], size, allocation)
    assert sum(given) == size and all(0 <= g <= s for g, s in zip(given, [10, 6, 4], strict=True))
    if allocation == "proportional":  # every stratum within one of its exact share
        assert all(abs(g - s * size / 20) < 1 for g, s in zip(given, [10, 6, 4], strict=True))
