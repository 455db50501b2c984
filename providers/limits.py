"""Concurrency and rate limits shared by every worker process, kept in Redis.

A slot is a member of a sorted set scored by its lease expiry: a worker that dies holding
one does not leak it for longer than the lease. A credential's requests and tokens per
minute are token buckets in one Redis hash, taken from atomically by a Lua script.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from redis.exceptions import RedisError

from prbench.queues import get_connection

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 8
LEASE_S = 900
POLL_S = 0.01

# Takes as many of the offered lease tokens (ARGV[5..]) as there are free slots; returns
# how many it took, the first ones offered.
ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local free = tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[1])
local taken = math.max(0, math.min(free, #ARGV - 4))
for i = 1, taken do
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4 + i])
end
if taken > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[4])
end
return taken
"""


# Two token buckets (requests, tokens) refilled continuously at limit/60 per second up to
# one minute's worth, which is how Anthropic documents its limits and close to OpenAI's.
# Not the `limits` package: its moving window pushes one list entry per unit of cost (a
# 100k-token request would push 100k entries), its sliding-window counter reads Redis's own
# clock (tests could not drive time), it cannot take from two limits in one atomic step, and
# it refuses a hit over the limit, so the top-up for tokens used beyond the estimate would
# be dropped. Here the caller passes the time, and "force" lets a bucket go into debt.
#
# KEYS[1]: the credential's hash. ARGV: now (seconds), force ("1" or "0"), then limit and
# cost for requests, then for tokens (a limit of 0: none). Returns {1, "0"} once taken, or
# {0, seconds until both buckets could pay} ("-1": never, the cost exceeds the limit).
# Numbers go back as strings: Redis would truncate a Lua number to an integer.
RATE_BUCKETS = """
local now = tonumber(ARGV[1])
local force = ARGV[2] == '1'
local last = tonumber(redis.call('HGET', KEYS[1], 'at')) or now
local elapsed = math.max(0, now - last)
local levels, unlimited, wait, full_in = {}, {}, 0, 1
for i, name in ipairs({'requests', 'tokens'}) do
  local limit, cost = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  if limit > 0 then
    if cost > limit and not force then
      return {0, '-1'}
    end
    local per_s = limit / 60
    local level = math.min(limit, (tonumber(redis.call('HGET', KEYS[1], name)) or limit) + elapsed * per_s)
    wait = math.max(wait, (cost - level) / per_s)
    levels[name] = level - cost
    full_in = math.max(full_in, (limit - level + cost) / per_s)
  else
    table.insert(unlimited, name)
  end
end
if wait > 0 and not force then
  return {0, tostring(wait)}
end
for name, level in pairs(levels) do
  redis.call('HSET', KEYS[1], name, tostring(level))
end
for _, name in ipairs(unlimited) do
  redis.call('HDEL', KEYS[1], name)
end
-- A clock behind the last caller's must not refill the same seconds twice.
redis.call('HSET', KEYS[1], 'at', tostring(math.max(now, last)))
-- A missing hash reads as full buckets, so it may go once it would have refilled.
redis.call('EXPIRE', KEYS[1], math.ceil(full_in) + 1)
return {1, '0'}
"""
RATE_POLL_S = 0.25  # a waiting call looks again at least this often: others may pay first
RATE_MIN_SLEEP_S = 0.001


@dataclass(frozen=True)
class RateLimit:
    """One credential's limits, shared by every call that uses it. None means no limit."""

    credential_id: int
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


def slots_key(arm_key: str) -> str:
    return f"prbench:slots:{arm_key}"


def waiting_key(arm_key: str) -> str:
    return f"prbench:waiting:{arm_key}"


def rate_key(credential_id: int) -> str:
    return f"prbench:rate:{credential_id}"


def rate_waiting_key(arm_key: str) -> str:
    return f"prbench:rate-waiting:{arm_key}"


def acquire_slots(arm_key: str, limit: int, count: int) -> list[str]:
    """Take up to ``count`` of the arm's free slots in one round trip, without waiting;
    returns their lease tokens (possibly none). Release them with ``release_slots``."""
    if not arm_key or count < 1:
        return []
    tokens = [uuid.uuid4().hex for _ in range(count)]
    now = time.time()
    script = get_connection().register_script(ACQUIRE)
    taken = script(keys=[slots_key(arm_key)], args=[now, now + LEASE_S, limit, LEASE_S, *tokens])
    return tokens[: int(taken)]


def release_slots(arm_key: str, tokens: list[str]) -> None:
    """Give slots back; releasing one twice (or after its lease ran out) does nothing.

    Never raises: it runs after a provider answered, and an answer already paid for must not
    be lost because Redis failed; a slot not given back expires with its lease."""
    if arm_key and tokens:
        try:
            get_connection().zrem(slots_key(arm_key), *tokens)
        except RedisError as exc:
            logger.warning("could not release %s slot(s) of %s: %s: %s", len(tokens), arm_key, type(exc).__name__, exc)


@contextlib.contextmanager
def arm_slot(arm_key: str, limit: int) -> Iterator[None]:
    """Hold one of the arm's ``limit`` concurrent-call slots; wait (visibly) for one if needed."""
    if not arm_key:
        yield
        return
    redis = get_connection()
    waiting = False
    try:
        while not (tokens := acquire_slots(arm_key, limit, 1)):
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
        release_slots(arm_key, tokens)


def take_rate_budget(limit: RateLimit, tokens: int, now: float) -> float:
    """Take one request and ``tokens`` from the credential's buckets if both can pay.

    Returns 0 once taken, else the seconds until they could (nothing is taken then), or -1
    when they never could because ``tokens`` exceeds the whole tokens-per-minute limit.
    """
    return _run_buckets(limit, 1, tokens, now, force=False)


def charge_tokens(limit: RateLimit, tokens: int, now: float) -> None:
    """Charge tokens already spent, even into debt: later calls wait until it is repaid."""
    _run_buckets(limit, 0, tokens, now, force=True)


def _run_buckets(limit: RateLimit, requests: int, tokens: int, now: float, *, force: bool) -> float:
    script = get_connection().register_script(RATE_BUCKETS)
    args = [now, int(force), limit.requests_per_minute or 0, requests, limit.tokens_per_minute or 0, tokens]
    _taken, wait = script(keys=[rate_key(limit.credential_id)], args=args)
    return float(wait)


def wait_for_rate_budget(limit: RateLimit, tokens: int, arm_key: str, deadline: float) -> bool:
    """Take rate budget, sleeping (visibly, per arm) until the buckets can pay.

    ``deadline`` is on ``time.monotonic()``. Returns False, having taken nothing, as soon as
    the wait would run past it or could never end.
    """
    redis = get_connection()
    counted = False
    try:
        while wait := take_rate_budget(limit, tokens, time.time()):
            if wait < 0 or time.monotonic() + wait > deadline:
                return False
            if arm_key and not counted:
                redis.incr(rate_waiting_key(arm_key))
                counted = True
            time.sleep(min(max(wait, RATE_MIN_SLEEP_S), RATE_POLL_S))
        return True
    finally:
        if counted:
            redis.decr(rate_waiting_key(arm_key))


@dataclass(frozen=True)
class Waiting:
    """Calls on some arms waiting right now, for a concurrency slot or for rate budget."""

    for_slot: int = 0
    for_rate_limit: int = 0


def waiting_for(arm_keys: list[str]) -> Waiting:
    """How many calls are waiting on these arms right now, and for what."""
    if not arm_keys:
        return Waiting()
    values = get_connection().mget([waiting_key(k) for k in arm_keys] + [rate_waiting_key(k) for k in arm_keys])
    return Waiting(_total(values[: len(arm_keys)]), _total(values[len(arm_keys) :]))


def _total(values: list) -> int:
    return sum(max(0, int(v)) for v in values if v is not None)
