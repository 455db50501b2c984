"""OpenRouter's model list, for suggesting model ids and showing their list prices.

``refresh()`` fetches it (the only network call) and caches it under VAR_DIR; readers use
the cache while it is younger than the TTL and otherwise the shipped fallback, so pages
and tests never depend on the network.
"""

from __future__ import annotations

import fnmatch
import json
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import httpx2
from django.conf import settings

from providers import egress

FALLBACK = Path(__file__).resolve().parent / "data" / "openrouter_models.json"
TTL_S = 24 * 3600


class CatalogError(Exception):
    pass


@dataclass(frozen=True)
class CatalogModel:
    id: str
    name: str
    context_length: int | None
    input_per_mtok: Decimal | None
    output_per_mtok: Decimal | None


def cache_path() -> Path:
    return Path(settings.VAR_DIR) / "model_catalog.json"


def refresh(timeout_s: float = 15.0) -> int:
    """Fetch the live list into the cache. Returns how many models it holds."""
    try:
        with egress.http_client(timeout_s) as client:
            response = client.get(settings.PRBENCH_OPENROUTER_MODELS_URL)
            response.raise_for_status()
            body = response.json()
    except egress.EgressRefused as exc:
        raise CatalogError(f"could not fetch the model list: egress refused: {exc}") from None
    except (httpx2.HTTPError, ValueError) as exc:
        raise CatalogError(f"could not fetch the model list: {type(exc).__name__}") from None
    models = _parse(body)
    if not models:
        raise CatalogError("the model list was empty or malformed")
    cache_path().write_text(json.dumps({"fetched_at": time.time(), "data": body.get("data", [])}))
    return len(models)


def models() -> tuple[list[CatalogModel], str]:
    """The catalog and where it came from ("cache" while fresh, else "fallback")."""
    try:
        cached = json.loads(cache_path().read_text())
        if time.time() - float(cached["fetched_at"]) < TTL_S:
            parsed = _parse(cached)
            if parsed:
                return parsed, "cache"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return _parse(json.loads(FALLBACK.read_text())), "fallback"


def search(pattern: str) -> list[CatalogModel]:
    needle = pattern.lower()
    glob = any(ch in needle for ch in "*?[")
    found = [
        m
        for m in models()[0]
        if (fnmatch.fnmatch(m.id.lower(), needle) if glob else needle in m.id.lower() or needle in m.name.lower())
    ]
    return sorted(found, key=lambda m: m.id)


def info(model_id: str) -> CatalogModel | None:
    return next((m for m in models()[0] if m.id == model_id), None)


def suggestions() -> list[str]:
    return sorted(m.id for m in models()[0])


def _parse(body: object) -> list[CatalogModel]:
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return []
    parsed = []
    for entry in body["data"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        pricing = entry.get("pricing") or {}
        parsed.append(
            CatalogModel(
                id=entry["id"],
                name=str(entry.get("name") or entry["id"]),
                context_length=entry.get("context_length") if isinstance(entry.get("context_length"), int) else None,
                input_per_mtok=_per_million(pricing.get("prompt")),
                output_per_mtok=_per_million(pricing.get("completion")),
            )
        )
    return parsed


def _per_million(per_token: object) -> Decimal | None:
    try:
        return (Decimal(str(per_token)) * 1_000_000).normalize()
    except (ArithmeticError, ValueError, TypeError):
        return None
