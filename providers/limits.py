"""Concurrency and rate limits shared by every worker process, kept in Redis.

A slot is a member of a sorted set scored by its lease expiry. Leases are short and renewed
by the holding process while it holds them, so a slot dies with its holder within a lease,
never later (a fixed long lease kept a killed worker's slots for 15 minutes). Each slot's
token names its holder, the holding process's worker lease (``set_holder_provider``): whoever
finds that process dead frees its slots at once (``release_holders_slots``) rather than after
their lease, so a restarted worker pool need not wait out the slots of the pool it replaced.
A call waiting for a slot blocks on a list that every release pushes to, rather than polling. Who is waiting,
for a slot or for rate budget, is a sorted set of expiring entries too: a waiter that dies
stops being counted. A credential's requests and tokens per minute are token buckets in one
Redis hash, taken from atomically by a Lua script.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from redis.exceptions import RedisError

from prbench.queues import get_connection

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 8
# A held slot's lease, renewed every third of it while the call runs.
LEASE_S = 30
# A waiter wakes at least this often even with no release to wake it: a slot can also free up
# when a dead holder's lease runs out, which nobody announces.
WAKE_S = 1.0
# A waiting entry lives this long unless its waiter refreshes it (at every wake-up).
WAITING_TTL_S = 3 * WAKE_S

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


# Frees the tokens (ARGV[3..]) and wakes as many live waiters, no more: a wake-up nobody takes
# would make a later waiter try again for nothing.
RELEASE = """
local freed = redis.call('ZREM', KEYS[1], unpack(ARGV, 3))
local waiters = redis.call('ZCOUNT', KEYS[2], ARGV[1], '+inf')
local wake = math.min(freed, waiters - redis.call('LLEN', KEYS[3]))
for i = 1, wake do
  redis.call('LPUSH', KEYS[3], '1')
end
if wake > 0 then
  redis.call('EXPIRE', KEYS[3], ARGV[2])
end
return freed
"""


# A token is "<holder>:<random>". A process with no worker lease (the web server testing a
# connection) holds its slots under a name of its own that no lease has: nobody can know it
# died, so its slots go when their lease runs out, as everyone's did before holders existed.
HOLDER_SEPARATOR = ":"
UNLEASED_PREFIX = "unleased-"


def _unleased_holder() -> str | None:
    return None


_holder_provider: Callable[[], str | None] = _unleased_holder
_unleased: tuple[int, str] = (0, "")  # (pid, name): a forked child is another holder


def set_holder_provider(provider: Callable[[], str | None]) -> None:
    """Name this process's slots after what ``provider`` returns: its worker lease's name once
    that lease is in the database, else None. Set by experiments/liveness.py, which providers/
    may not import."""
    global _holder_provider
    _holder_provider = provider


def holder_name() -> str:
    """Whose slots this process takes: its lease's name, or a name of its own if it has none."""
    global _unleased
    if holder := _holder_provider():
        return holder
    if _unleased[0] != os.getpid():
        _unleased = (os.getpid(), f"{UNLEASED_PREFIX}{uuid.uuid4().hex}")
    return _unleased[1]


def token_holder(token: str) -> str | None:
    """The lease whose process holds the slot, or None: no lease names it (see above)."""
    holder, separator, _ = token.rpartition(HOLDER_SEPARATOR)
    if not separator or holder.startswith(UNLEASED_PREFIX):
        return None
    return holder


class CapacityTimeout(Exception):
    """No slot freed up before the caller's deadline: the platform's capacity, not the model."""


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


def freed_key(arm_key: str) -> str:
    return f"prbench:slot-freed:{arm_key}"


def waiting_key(arm_key: str) -> str:
    return f"prbench:waiting:{arm_key}"


def rate_key(credential_id: int) -> str:
    return f"prbench:rate:{credential_id}"


def rate_waiting_key(arm_key: str) -> str:
    return f"prbench:rate-waiting:{arm_key}"


class _HeldSlots:
    """The slots this process holds, whose leases a daemon thread renews until they are
    released. A process that dies stops renewing, and its slots free up within a lease at the
    latest (at once, when a worker on its machine sees it dead: experiments/dead_holders.py)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_arm: dict[str, set[str]] = {}
        self.renewer: threading.Thread | None = None

    def add(self, arm_key: str, tokens: list[str]) -> None:
        with self.lock:
            self.by_arm.setdefault(arm_key, set()).update(tokens)
            if self.renewer is None or not self.renewer.is_alive():
                self.renewer = threading.Thread(target=self._renew_forever, name="slot-leases", daemon=True)
                self.renewer.start()

    def remove(self, arm_key: str, tokens: list[str]) -> None:
        with self.lock:
            held = self.by_arm.get(arm_key)
            if held is not None:
                held.difference_update(tokens)
                if not held:
                    del self.by_arm[arm_key]

    def _renew_forever(self) -> None:
        while True:
            time.sleep(LEASE_S / 3)
            try:
                self.renew()
            except RedisError as exc:  # Redis is away: try again next time; the calls go on
                logger.warning("could not renew slot leases: %s", exc)

    def renew(self) -> None:
        with self.lock:
            held = {arm_key: list(tokens) for arm_key, tokens in self.by_arm.items()}
        if not held:
            return
        expiry = time.time() + LEASE_S
        pipe = get_connection().pipeline(transaction=False)
        for arm_key, tokens in held.items():
            # XX: only leases still held; one that ran out meanwhile is not brought back.
            pipe.zadd(slots_key(arm_key), dict.fromkeys(tokens, expiry), xx=True)
            pipe.expire(slots_key(arm_key), LEASE_S)
        pipe.execute()


_held = _HeldSlots()


def acquire_slots(arm_key: str, limit: int, count: int) -> list[str]:
    """Take up to ``count`` of the arm's free slots in one round trip, without waiting;
    returns their lease tokens (possibly none). Release them with ``release_slots``."""
    if not arm_key or count < 1:
        return []
    holder = holder_name()
    tokens = [f"{holder}{HOLDER_SEPARATOR}{uuid.uuid4().hex}" for _ in range(count)]
    now = time.time()
    script = get_connection().register_script(ACQUIRE)
    taken = tokens[: int(script(keys=[slots_key(arm_key)], args=[now, now + LEASE_S, limit, LEASE_S, *tokens]))]
    if taken:
        _held.add(arm_key, taken)
    return taken


def release_slots(arm_key: str, tokens: list[str]) -> None:
    """Give slots back and wake as many waiters; releasing one twice (or after its lease
    ran out) frees nothing more.

    Never raises: it runs after a provider answered, and an answer already paid for must not
    be lost because Redis failed; a slot not given back expires with its lease."""
    if not (arm_key and tokens):
        return
    _held.remove(arm_key, tokens)  # no longer renewed, whatever happens next
    try:
        script = get_connection().register_script(RELEASE)
        keys = [slots_key(arm_key), waiting_key(arm_key), freed_key(arm_key)]
        script(keys=keys, args=[time.time(), LEASE_S, *tokens])
    except RedisError as exc:
        logger.warning("could not release %s slot(s) of %s: %s: %s", len(tokens), arm_key, type(exc).__name__, exc)


def slot_holders() -> set[str]:
    """Every lease that holds a slot of some arm right now (lease-less holders aside)."""
    holders: set[str] = set()
    for _key, tokens in _slots_by_key():
        holders.update(filter(None, map(token_holder, tokens)))
    return holders


def release_holders_slots(holders: set[str]) -> int:
    """Free every slot these (dead) holders hold, on every arm, waking waiters as a release
    does; how many were freed."""
    if not holders:
        return 0
    freed = 0
    for key, tokens in _slots_by_key():
        theirs = [token for token in tokens if token_holder(token) in holders]
        if theirs:
            arm_key = key.removeprefix(slots_key(""))
            script = get_connection().register_script(RELEASE)
            keys = [slots_key(arm_key), waiting_key(arm_key), freed_key(arm_key)]
            freed += int(script(keys=keys, args=[time.time(), LEASE_S, *theirs]))
    return freed


def _slots_by_key() -> Iterator[tuple[str, list[str]]]:
    # SCAN, not KEYS: a production Redis is not blocked. There is one key per arm with calls
    # in flight, so this is a handful of keys, read once per sweep or worker start.
    redis = get_connection()
    for key in redis.scan_iter(match=slots_key("*"), count=500):
        name = _text(key)
        yield name, [_text(token) for token in redis.zrange(name, 0, -1)]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextlib.contextmanager
def arm_slot(arm_key: str, limit: int, deadline: float | None = None) -> Iterator[None]:
    """Hold one of the arm's ``limit`` concurrent-call slots, waiting (visibly) for one if
    needed. ``deadline`` (on ``time.monotonic()``) bounds the wait: past it, ``CapacityTimeout``."""
    if not arm_key:
        yield
        return
    tokens = wait_for_slot(arm_key, limit, deadline)
    try:
        yield
    finally:
        release_slots(arm_key, tokens)


def wait_for_slot(arm_key: str, limit: int, deadline: float | None = None) -> list[str]:
    """One slot's lease token, once one is free: blocks until a release (or at most
    ``WAKE_S``) between tries, so a waiting call costs Redis a request a second, not a
    hundred. Raises ``CapacityTimeout`` when ``deadline`` passes first."""
    if tokens := acquire_slots(arm_key, limit, 1):
        return tokens
    redis = get_connection()
    with _counted_as_waiting(waiting_key(arm_key)) as still_waiting:
        while not (tokens := acquire_slots(arm_key, limit, 1)):
            left = WAKE_S if deadline is None else min(WAKE_S, deadline - time.monotonic())
            if left <= 0:
                raise CapacityTimeout(f"no free slot of {limit} within the deadline")
            redis.blpop([freed_key(arm_key)], timeout=max(left, 0.01))
            still_waiting()
    return tokens


def wait_for_release(arm_keys: list[str], timeout: float) -> None:
    """Block until one of these arms frees a slot, or ``timeout`` seconds (at most
    ``WAKE_S``) pass: for a caller that takes its slots itself once woken (a job waiting to
    claim attempts of full arms). It counts among each arm's waiters meanwhile, or a release
    would wake nobody."""
    with contextlib.ExitStack() as stack:
        for key in arm_keys:
            stack.enter_context(_counted_as_waiting(waiting_key(key)))
        get_connection().blpop([freed_key(key) for key in arm_keys], timeout=max(min(timeout, WAKE_S), 0.01))


@contextlib.contextmanager
def _counted_as_waiting(key: str) -> Iterator:
    """Count the caller among ``key``'s waiters while the block runs. The entry expires unless
    refreshed (the block gets the function that does it), so a waiter that dies drops out."""
    redis = get_connection()
    member = uuid.uuid4().hex

    def refresh() -> None:
        redis.zadd(key, {member: time.time() + WAITING_TTL_S})
        redis.expire(key, int(WAITING_TTL_S) + 1)

    refresh()
    try:
        yield refresh
    finally:
        with contextlib.suppress(RedisError):  # Redis away: the entry expires by itself
            redis.zrem(key, member)


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
    wait = take_rate_budget(limit, tokens, time.time())
    if not wait:
        return True
    waiting = _counted_as_waiting(rate_waiting_key(arm_key)) if arm_key else contextlib.nullcontext(lambda: None)
    with waiting as still_waiting:
        while wait:
            if wait < 0 or time.monotonic() + wait > deadline:
                return False
            time.sleep(min(max(wait, RATE_MIN_SLEEP_S), RATE_POLL_S))
            still_waiting()
            wait = take_rate_budget(limit, tokens, time.time())
    return True


@dataclass(frozen=True)
class Waiting:
    """Calls on some arms waiting right now, for a concurrency slot or for rate budget."""

    for_slot: int = 0
    for_rate_limit: int = 0


def waiting_for(arm_keys: list[str]) -> Waiting:
    """How many calls are waiting on these arms right now, and for what."""
    if not arm_keys:
        return Waiting()
    now = time.time()
    pipe = get_connection().pipeline(transaction=False)
    for key in [*map(waiting_key, arm_keys), *map(rate_waiting_key, arm_keys)]:
        pipe.zcount(key, now, "+inf")  # entries not yet expired: their waiters are alive
    counts = pipe.execute()
    return Waiting(sum(counts[: len(arm_keys)]), sum(counts[len(arm_keys) :]))
