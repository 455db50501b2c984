"""Hard budgets in USD, shared by every worker process, kept in Redis.

Each budget (a run's, an experiment's) is one Redis integer: the spend in nano-USD, recorded
and reserved. Before a call the gateway reserves the most it can cost against every budget
of the attempt in one Lua script, so two workers can never both take the last headroom; a
call that would pass any of them is not made. After the call the reservation is replaced
by what the call cost.

Postgres holds the spend that counts (``Attempt.cost_usd``); Redis only adds what is in
flight. A missing key (Redis restarted, or the budget's first call) is created from the
spend recorded in the database, which the caller passes in with each budget: recorded
spend survives a Redis restart, reservations in flight at that moment do not.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from decimal import Decimal

from redis.exceptions import RedisError

from prbench.queues import get_connection
from providers.errors import ErrorCategory, ProviderError

logger = logging.getLogger(__name__)

NANO_PER_USD = 10**9
# Long enough for any run's pauses; an idle key that expires is rebuilt from the database.
KEY_TTL_S = 7 * 24 * 3600

# KEYS: the budgets. ARGV[1]: the amount to reserve, ARGV[2]: the keys' lifetime, then per
# key its limit and the spend recorded in the database, all in nano-USD. Reserves against
# every key or none: returns {1, 0, "0"}, or {0, index of the first key the amount would
# pass, its spend} having reserved nothing. Spend goes back as a string: Redis truncates a
# Lua number, and a double holds every nano-USD figure below $9 million exactly.
RESERVE = """
local amount, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[2 + 2 * i], 'NX') then
    redis.call('EXPIRE', key, ttl)
  end
  local spent = tonumber(redis.call('GET', key))
  if spent + amount > tonumber(ARGV[1 + 2 * i]) then
    return {0, i, tostring(spent)}
  end
end
for _, key in ipairs(KEYS) do
  redis.call('INCRBY', key, amount)
  redis.call('EXPIRE', key, ttl)
end
return {1, 0, '0'}
"""

# KEYS: the budgets. ARGV[1]: the change (the actual cost less the reservation, negative to
# give headroom back), ARGV[2]: the keys' lifetime, then per key the spend to start from if
# the key is gone (Redis lost it since the reservation): the recorded spend plus the cost.
SETTLE = """
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    redis.call('INCRBY', key, ARGV[1])
  else
    redis.call('SET', key, ARGV[2 + i])
  end
  redis.call('EXPIRE', key, tonumber(ARGV[2]))
end
return 1
"""


@dataclass(frozen=True)
class Budget:
    """One hard limit a call counts against. Plain values: pool threads use it without the
    database, so the spend already recorded there comes along."""

    key: str
    name: str  # as the refusal names it: "run budget", "experiment budget"
    limit_usd: Decimal
    recorded_usd: Decimal = Decimal(0)


def run_budget_key(run_id: int) -> str:
    return f"prbench:budget:run:{run_id}"


def experiment_budget_key(experiment_id: int) -> str:
    return f"prbench:budget:experiment:{experiment_id}"


@dataclass(frozen=True)
class Reservation:
    budgets: tuple[Budget, ...]
    nano_usd: int


def to_nano(usd: Decimal) -> int:
    """Rounded up: a reservation is never smaller than what it stands for."""
    return math.ceil(usd * NANO_PER_USD)


def reserve(budgets: tuple[Budget, ...], amount_usd: Decimal) -> Reservation:
    """Reserve ``amount_usd`` against every budget at once, or raise ``BUDGET_EXCEEDED``
    (reserving nothing) naming the first budget it would pass."""
    amount = to_nano(amount_usd)
    args: list[int] = [amount, KEY_TTL_S]
    for budget in budgets:
        args += [to_nano(budget.limit_usd), to_nano(budget.recorded_usd)]
    script = get_connection().register_script(RESERVE)
    reserved, index, spent = script(keys=[b.key for b in budgets], args=args)
    if not reserved:
        budget = budgets[int(index) - 1]
        raise ProviderError(
            ErrorCategory.BUDGET_EXCEEDED,
            f"the {budget.name} of ${budget.limit_usd} would be passed: ${_usd(int(spent))} is spent or "
            f"reserved and this call may cost up to ${_usd(amount)}, so it was not made",
        )
    return Reservation(budgets, amount)


def settle(reservation: Reservation, actual_usd: Decimal) -> None:
    """Replace the reservation by what the call cost.

    Never raises: it runs after the provider answered, and an answer already paid for must
    not be lost (and asked for again) because Redis failed. The reservation then stays as
    spent, the safe error, until the key is rebuilt from the database's recorded spend."""
    actual = to_nano(actual_usd)
    args: list[int] = [actual - reservation.nano_usd, KEY_TTL_S]
    args += [to_nano(budget.recorded_usd) + actual for budget in reservation.budgets]
    try:
        script = get_connection().register_script(SETTLE)
        script(keys=[b.key for b in reservation.budgets], args=args)
    except RedisError as exc:
        logger.warning("could not settle a budget reservation: %s: %s", type(exc).__name__, exc)


def release(reservation: Reservation) -> None:
    """Give the whole reservation back: the call cost nothing."""
    settle(reservation, Decimal(0))


def _usd(nano_usd: int) -> str:
    return f"{Decimal(nano_usd) / NANO_PER_USD:.6f}".rstrip("0").rstrip(".") if nano_usd else "0"
