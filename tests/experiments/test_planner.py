from experiments.planner import attempt_order, sample_tasks

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
