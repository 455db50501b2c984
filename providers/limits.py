"""Concurrency limits shared by every worker process, kept in Redis.

A slot is a member of a sorted set scored by its lease expiry: a worker that dies holding
one does not leak it for longer than the lease.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator

from prbench.queues import get_connection

DEFAULT_MAX_CONCURRENCY = 8
LEASE_S = 900
POLL_S = 0.01

ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  redis.call('EXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
"""


def slots_key(arm_key: str) -> str:
    return f"prbench:slots:{arm_key}"


def waiting_key(arm_key: str) -> str:
    return f"prbench:waiting:{arm_key}"


@contextlib.contextmanager
def arm_slot(arm_key: str, limit: int) -> Iterator[None]:
    """Hold one of the arm's ``limit`` concurrent-call slots; wait (visibly) for one if needed."""
    if not arm_key:
        yield
        return
    redis = get_connection()
    acquire = redis.register_script(ACQUIRE)
    token = uuid.uuid4().hex
    waiting = False
    try:
        while not acquire(keys=[slots_key(arm_key)], args=[time.time(), time.time() + LEASE_S, limit, token, LEASE_S]):
            if not waiting:
                redis.incr(waiting_key(arm_key))
                waiting = True
            time.sleep(POLL_S)
    finally:
        if waiting:
            redis.decr(waiting_key(arm_key))
    try:
        yield
    finally:
        redis.zrem(slots_key(arm_key), token)


def waiting_for(arm_keys: list[str]) -> int:
    """How many calls are waiting for a slot on these arms right now."""
    if not arm_keys:
        return 0
    values = get_connection().mget([waiting_key(k) for k in arm_keys])
    return sum(max(0, int(v)) for v in values if v is not None)
