"""The response cache's store: a batch's stored answers found in one query before its calls,
new answers saved in bulk when outcomes are recorded. What makes two requests the same is
providers/response_cache.py's to say."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import F

from experiments.models import CachedResponse
from providers.types import USAGE_FIELDS, Completion, Usage

CACHE_COST_SOURCE = "cache"  # an attempt whose answer was reused: no call, nothing paid


@dataclass(frozen=True)
class CachedAnswer:
    entry_id: int
    source_attempt_id: int | None
    completion: Completion


@dataclass(frozen=True)
class CacheSlot:
    """An attempt's place in the response cache, decided on the job's thread: its key, and
    the stored answer it reuses (a hit) or None (a miss, whose answer is stored if it
    succeeds)."""

    org_id: int
    key: str
    hit: CachedAnswer | None = None


def find_cached(wanted: set[tuple[int, str]]) -> dict[tuple[int, str], CachedAnswer]:
    """The stored answers among these (organisation, key) pairs, in one query."""
    if not wanted:
        return {}
    entries = CachedResponse.objects.filter(
        org_id__in={org_id for org_id, _ in wanted}, key__in={key for _, key in wanted}
    )
    return {
        (entry.org_id, entry.key): CachedAnswer(entry.pk, entry.source_attempt_id, cached_completion(entry))
        for entry in entries
        if (entry.org_id, entry.key) in wanted
    }


def cached_completion(entry: CachedResponse) -> Completion:
    """The stored answer as a completion that cost nothing and took no time: this attempt
    made no call. The original call's cost and latency stay on its own attempt."""
    return Completion(
        text=entry.text,
        finish_reason=entry.finish_reason,
        usage=Usage(**{name: entry.usage.get(name, 0) for name in USAGE_FIELDS}),
        latency_ms=0,
        cost_usd=Decimal(0),
        model_served=entry.model_served,
        request_id=entry.request_id,
        cost_source=CACHE_COST_SOURCE,
        raw_response=entry.raw_response,
        warnings=tuple(entry.warnings),
    )


def store_answers(answers: list[tuple[CacheSlot, int, Completion]], now: datetime) -> None:
    """Save each (slot, attempt id, completion) of a call that succeeded. An answer already
    stored under its key (another worker's, or an earlier one of the same batch) is kept."""
    CachedResponse.objects.bulk_create(
        [
            CachedResponse(
                org_id=slot.org_id,
                key=slot.key,
                text=completion.text,
                finish_reason=completion.finish_reason[:64],
                usage=asdict(completion.usage),
                model_served=completion.model_served[:200],
                request_id=completion.request_id[:200],
                raw_response=completion.raw_response,
                cost_usd=completion.cost_usd,
                cost_source=completion.cost_source if completion.cost_usd is not None else "",
                cost_breakdown=completion.cost_breakdown if completion.cost_usd is not None else {},
                warnings=list(completion.warnings),
                source_attempt_id=attempt_id,
                created_at=now,
            )
            for slot, attempt_id, completion in answers
        ],
        ignore_conflicts=True,
    )


def count_hits(entry_ids: list[int]) -> None:
    """One UPDATE per distinct count (usually one), not one per reuse."""
    by_count: dict[int, list[int]] = {}
    for entry_id, count in Counter(entry_ids).items():
        by_count.setdefault(count, []).append(entry_id)
    for count, ids in by_count.items():
        CachedResponse.objects.filter(pk__in=ids).update(hits=F("hits") + count)
