import pytest

from lru_cache import LRUCache


def test_put_and_get():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert len(cache) == 1


def test_miss_returns_default():
    cache = LRUCache(2)
    assert cache.get("missing") is None
    assert cache.get("missing", 42) == 42


def test_evicts_oldest_when_full():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]


def test_updating_key_refreshes_it():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.get("a") == 10
    assert "b" not in cache


def test_get_refreshes_recency():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "a" in cache
    assert "b" not in cache


def test_keys_ordered_by_use():
    cache = LRUCache(3)
    for key in "xyz":
        cache.put(key, key.upper())
    cache.get("x")
    assert cache.keys() == ["y", "z", "x"]


def test_hit_and_miss_counters():
    cache = LRUCache(1)
    cache.put("a", 1)
    cache.get("a")
    cache.get("b")
    cache.get("a")
    assert (cache.hits, cache.misses) == (2, 1)


def test_invalid_capacity():
    with pytest.raises(ValueError):
        LRUCache(0)
