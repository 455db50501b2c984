"""Django's Redis cache, on the embedded Redis when no REDIS_URL is configured.

allauth keeps its login-failure counters in the cache, so the cache must be the one Redis
every web process shares (per-process memory would give N workers N times the attempts).
With no REDIS_URL that Redis is the embedded one, which the first process to need it starts:
this backend asks for it before its first command, as the queues do.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache
from django.utils.functional import cached_property

from prbench.queues import ensure_redis


class SharedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> Any:
        ensure_redis()
        return super()._cache
