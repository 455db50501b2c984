"""Answers paid for but not yet recorded, kept in Redis until their record commits.

A job writes its attempts' results in bulk, up to ``FLUSH_AFTER_S`` after they arrive. A worker
killed in between would lose answers the provider has already been paid for, and the attempts,
claimed again once its lease lapsed, would pay for them a second time. So each answer is written
here as soon as the job's thread takes it from the thread that made the call (one pipelined round
trip for every answer that arrived meanwhile), keyed by its attempt; an attempt claimed again reads
its entry before calling, and an entry is deleted once the attempt's record has committed.

Stored as JSON, never pickled: whoever can write to Redis must not be able to run code here.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from redis.exceptions import RedisError

from prbench.json_bytes import json_bytes
from prbench.queues import get_connection
from providers.types import USAGE_FIELDS, Completion, ToolCall, Usage

logger = logging.getLogger(__name__)

# Long enough to outlast a database outage that keeps a result from being written; an entry
# is deleted as soon as its record commits, so only those of lost records stay this long.
KEEP_S = 24 * 3600
RECOVERED = "this answer arrived before its worker stopped; it was recorded from the answer journal, not paid for again"


COMPLETION_FIELDS = tuple(f.name for f in fields(Completion))


def journal_key(attempt_id: int) -> str:
    return f"prbench:answer:{attempt_id}"


def turns_key(attempt_id: int) -> str:
    """An agent attempt's turns: a hash of turn number to answer (experiments/agent.py)."""
    return f"prbench:answer-turns:{attempt_id}"


def sent_key(attempt_id: int) -> str:
    """How many calls were sent for each of an attempt's turns (a single-turn answer is turn
    1), over all its claims: a hash of turn number to count."""
    return f"prbench:answer-sent:{attempt_id}"


def mark_sent(attempt_id: int, turn: int = 1) -> int:
    """Count a call about to be sent for this turn; returns how many calls earlier claims
    sent for it (0 on a first call, or when Redis cannot be reached: counting must never
    keep a call from being made). A claim only calls for a turn the journal holds no answer
    for, so each earlier call it finds here is one whose answer was lost with its worker
    (killed, or frozen past its lease, mid-call): this call pays for that answer again.

    One Redis round trip per call: for a turn of an agent, or an attempt claimed again (which
    needs the count back); a job counts its first claims' calls in bulk (``mark_sent_many``)."""
    key = sent_key(attempt_id)
    try:
        with get_connection().pipeline(transaction=False) as pipe:
            pipe.hincrby(key, str(turn), 1)
            pipe.expire(key, KEEP_S)
            sent, _ = pipe.execute()
    except RedisError as exc:
        logger.warning("attempt %s: could not count its call: %s", attempt_id, type(exc).__name__)
        return 0
    return int(sent) - 1


def mark_sent_many(attempt_ids: list[int]) -> None:
    """``mark_sent`` for the single turn of each of a claimed chunk's attempts, in one round
    trip, just before the job hands them to its threads to call: a first claim needs no count
    back (no claim before it sent anything). Counted a moment before the call goes out, so a
    worker killed in between over-counts by one call it never made, never under-counts."""
    if not attempt_ids:
        return
    try:
        get_connection().eval(_MARK_SENT_MANY, len(attempt_ids), *map(sent_key, attempt_ids), KEEP_S)
    except RedisError as exc:
        logger.warning("could not count the calls of %s attempt(s): %s", len(attempt_ids), type(exc).__name__)


# One command for a chunk's keys: a pipeline of two commands per attempt cost redis-py more
# CPU than the call it counts (issue 31). Lua runs on the server, atomically, keys named.
_MARK_SENT_MANY = """
for _, key in ipairs(KEYS) do
    redis.call('HINCRBY', key, '1', 1)
    redis.call('EXPIRE', key, ARGV[1])
end
"""
_SET_MANY = """
local keep_s = ARGV[#ARGV]
for index, key in ipairs(KEYS) do
    redis.call('SET', key, ARGV[index], 'EX', keep_s)
end
"""


# Only a count that is there: one lost with a restarted Redis must not go below nothing.
_UNMARK = """
local sent = tonumber(redis.call('HGET', KEYS[1], '1') or '0')
if sent > 0 then redis.call('HINCRBY', KEYS[1], '1', -1) end
"""


def unmark_sent(attempt_id: int) -> None:
    """Take back a first turn's call counted by ``mark_sent`` or ``mark_sent_many`` that the
    platform's failure kept from going out (the attempt was given back to the queue). Never
    raises: a count left over only over-counts."""
    try:
        get_connection().eval(_UNMARK, 1, sent_key(attempt_id))
    except RedisError as exc:
        logger.warning("attempt %s: could not take back its call's count: %s", attempt_id, type(exc).__name__)


def _stored(completion: Completion) -> dict[str, Any]:
    # Field by field, not asdict(), which deep-copies the raw response first; and without the
    # request body the provider was sent (the prompt, often most of the bytes): nothing
    # records it from the completion, and the attempt keeps its own request.
    stored = {name: getattr(completion, name) for name in COMPLETION_FIELDS}
    # Usage field by field too: asdict() walks and copies recursively, at a tenth of the
    # journal's CPU for six integers.
    usage = {name: getattr(completion.usage, name) for name in USAGE_FIELDS}
    stored.update(usage=usage, raw_request={}, tool_calls=[asdict(call) for call in completion.tool_calls])
    return stored


def keep(attempt_id: int, completion: Completion, responded_at: datetime) -> None:
    keep_many([(attempt_id, completion, responded_at)])


def keep_many(answers: list[tuple[int, Completion, datetime]]) -> None:
    """Answers as they reach the job's thread, in one round trip. Never raises: the answers
    are in memory too, and Redis failing must not lose them."""
    if not answers:
        return
    keys = [journal_key(attempt_id) for attempt_id, _, _ in answers]
    entries = [
        json_bytes({"completion": _stored(completion), "responded_at": responded_at.isoformat()}, default=str)
        for _, completion, responded_at in answers
    ]
    try:
        get_connection().eval(_SET_MANY, len(keys), *keys, *entries, KEEP_S)
    except RedisError as exc:
        logger.warning("could not keep %s answer(s) in the journal: %s", len(answers), type(exc).__name__)


def keep_turn(attempt_id: int, turn: int, completion: Completion) -> bool:
    """One agent turn's answer, the moment it arrives; whether it was kept. Never raises,
    like ``keep``."""
    key = turns_key(attempt_id)
    try:
        with get_connection().pipeline(transaction=False) as pipe:
            pipe.hset(key, str(turn), json_bytes(_stored(completion), default=str))
            pipe.expire(key, KEEP_S)
            pipe.execute()
    except RedisError as exc:
        logger.warning("attempt %s: could not keep turn %s in the journal: %s", attempt_id, turn, type(exc).__name__)
        return False
    return True


@dataclass(frozen=True)
class KeptTurns:
    """The turns an earlier claim of an agent attempt paid for, and the calls sent for each
    beyond the one its answer came from (lost with a worker that died mid-call)."""

    answers: dict[int, Completion]
    repeat_calls: dict[int, int]


def kept_turns(attempt_id: int) -> KeptTurns:
    """The turns an earlier claim of this agent attempt paid for, by number. Only an unbroken
    run from turn 1 is usable: a later turn's answer answered a history that is gone. A Redis
    error propagates: the attempt goes back to the queue rather than pay again."""
    with get_connection().pipeline(transaction=False) as pipe:
        pipe.hgetall(turns_key(attempt_id))
        pipe.hgetall(sent_key(attempt_id))
        raw, sent = pipe.execute()
    turns: dict[int, Completion] = {}
    for number in range(1, len(raw) + 1):
        entry = raw.get(str(number).encode()) or raw.get(str(number))
        if entry is None:
            break
        try:
            turns[number] = _completion(json.loads(entry))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("attempt %s: turn %s in the journal is unreadable (%s)", attempt_id, number, exc)
            break
    sent_for = {int(turn): int(count) for turn, count in sent.items()}
    return KeptTurns(turns, {number: max(0, sent_for.get(number, 1) - 1) for number in turns})


@dataclass(frozen=True)
class Kept:
    """An answer an earlier claim paid for and never recorded."""

    completion: Completion
    responded_at: datetime
    # Calls sent for it beyond the one this answer came from: an earlier claim's call lost with
    # its worker, which the claim that then called again counted only in its own memory.
    repeat_calls: int


def kept(attempt_id: int) -> Kept | None:
    """The attempt's answer from an earlier claim, if one arrived and was never recorded, with
    how many other calls its claims sent. A Redis error propagates: the attempt goes back to
    the queue rather than pay again."""
    with get_connection().pipeline(transaction=False) as pipe:
        pipe.get(journal_key(attempt_id))
        pipe.hget(sent_key(attempt_id), "1")
        raw, sent = pipe.execute()
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        completion = _completion(entry["completion"])
        responded_at = datetime.fromisoformat(entry["responded_at"])
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("attempt %s: its journal entry is unreadable (%s); calling again", attempt_id, exc)
        return None
    recovered = replace(completion, warnings=(*completion.warnings, RECOVERED))
    return Kept(recovered, responded_at, max(0, int(sent or 1) - 1))


def calls_beyond_one_per_turn(attempt_ids: list[int]) -> dict[int, int]:
    """For attempts given up on (retired after too many claims): the calls their claims sent
    beyond one per turn, each paid for an answer a dead worker never delivered. One pipelined
    read; empty when Redis cannot say (the count is then unknown, not zero: nothing is stored)."""
    if not attempt_ids:
        return {}
    try:
        with get_connection().pipeline(transaction=False) as pipe:
            for attempt_id in attempt_ids:
                pipe.hvals(sent_key(attempt_id))
            counts = pipe.execute()
    except RedisError as exc:
        logger.warning("could not read the calls sent for %s attempt(s): %s", len(attempt_ids), type(exc).__name__)
        return {}
    return {pk: sum(max(0, int(n) - 1) for n in sent) for pk, sent in zip(attempt_ids, counts, strict=True) if sent}


def forget(attempt_ids: list[int]) -> None:
    """Delete recorded attempts' entries; never raises (an entry left over expires)."""
    if not attempt_ids:
        return
    try:
        get_connection().delete(
            *map(journal_key, attempt_ids), *map(turns_key, attempt_ids), *map(sent_key, attempt_ids)
        )
    except RedisError as exc:
        logger.warning("could not delete %s journal entries: %s", len(attempt_ids), type(exc).__name__)


def _completion(stored: dict[str, Any]) -> Completion:
    values = {name: value for name, value in stored.items() if name in COMPLETION_FIELDS}
    values["usage"] = Usage(**values["usage"])
    values["cost_usd"] = None if values.get("cost_usd") is None else Decimal(values["cost_usd"])
    values["retry_log"] = tuple(values.get("retry_log", ()))
    values["warnings"] = tuple(values.get("warnings", ()))
    values["tool_calls"] = tuple(ToolCall(**call) for call in values.get("tool_calls", ()))
    return Completion(**values)
