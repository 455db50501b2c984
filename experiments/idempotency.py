"""Starting a run at most once per ``Idempotency-Key`` (the JSON API's run start).

A client that retries a start (a timeout, a dropped connection, a CI job run again) sends the
same key: it gets the run the first request started, not a second one. The same key with
other choices is a mistake the client must hear about (a conflict), not a silent replay.
Keys are per organisation and may be used again once IDEMPOTENCY_KEY_TTL has passed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from experiments.actions import check_start_run, do_start_run
from experiments.models import ApiIdempotencyKey, Experiment, Run

IDEMPOTENCY_KEY_TTL = timedelta(hours=24)


class IdempotencyConflict(Exception):
    """The key was used for a different request (another experiment, or other choices)."""


@dataclass(frozen=True)
class StartChoices:
    seed: int | None = None
    inference_only: bool = False
    budget_usd: Decimal | None = None


def start_fingerprint(experiment: Experiment, choices: StartChoices) -> str:
    """The request a key stands for, after parsing: ``{"seed": 3}`` and ``{"seed": 3,
    "inference_only": false}`` are the same start, and so are budgets 5 and "5.00"."""
    document = {
        "experiment": str(experiment.code),
        "seed": choices.seed,
        "inference_only": choices.inference_only,
        "budget_usd": None if choices.budget_usd is None else str(choices.budget_usd),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _live_key(org_id: int, key: str) -> ApiIdempotencyKey | None:
    cutoff = timezone.now() - IDEMPOTENCY_KEY_TTL
    return (
        ApiIdempotencyKey.objects.filter(org_id=org_id, key=key, created_at__gte=cutoff).select_related("run").first()
    )


def _replayed(used: ApiIdempotencyKey, fingerprint: str) -> Run:
    if used.fingerprint != fingerprint:
        raise IdempotencyConflict(
            "this Idempotency-Key was used for a different start (another experiment or other choices) "
            f"within the last {IDEMPOTENCY_KEY_TTL.total_seconds() / 3600:g} hours: use a new key"
        )
    assert used.run is not None  # set in the transaction that committed the row
    return used.run


def start_run_once(experiment: Experiment, user: Any, key: str, choices: StartChoices) -> tuple[Run, bool]:
    """The run this key started (and False), or a new one started now (and True).

    A replay is answered before ``check_start_run``: the run exists, whatever changed since.
    Otherwise the key's row is inserted first and the run started in the same transaction;
    a concurrent request with the same key blocks on the unique index until this commits,
    then fails its insert and reads the run this one started. Raises IdempotencyConflict,
    and ValidationError when the run cannot start (then nothing is kept, the key included).
    """
    fingerprint = start_fingerprint(experiment, choices)
    used = _live_key(experiment.org_id, key)
    if used is not None:
        return _replayed(used, fingerprint), False
    check_start_run(experiment, inference_only=choices.inference_only, budget_usd=choices.budget_usd)
    with transaction.atomic():
        # An expired row of the key gives way to this start.
        stale = timezone.now() - IDEMPOTENCY_KEY_TTL
        ApiIdempotencyKey.objects.filter(org_id=experiment.org_id, key=key, created_at__lt=stale).delete()
        try:
            with transaction.atomic():
                claim = ApiIdempotencyKey.objects.create(org_id=experiment.org_id, key=key, fingerprint=fingerprint)
        except IntegrityError:
            claim = None
        if claim is None:
            # Another request holding the key committed while this one waited: its run is the one.
            winner = ApiIdempotencyKey.objects.select_related("run").get(org_id=experiment.org_id, key=key)
            return _replayed(winner, fingerprint), False
        run = do_start_run(
            experiment, user, seed=choices.seed, inference_only=choices.inference_only, budget_usd=choices.budget_usd
        )
        claim.run = run
        claim.save(update_fields=["run"])
        return run, True
