"""OpenRouter's model list, for suggesting model ids and showing their list prices.

``refresh()`` fetches it (the only network call) and caches it under VAR_DIR. Readers use the
cache whatever its age - a week-old list of current models beats a shipped one from months
ago - and say how old it is, suggesting a refresh once it is older than a day. The shipped
fallback is only for a machine that has never fetched the list (or whose cache is unreadable),
so pages and tests never depend on the network.
"""

from __future__ import annotations

import fnmatch
import json
import math
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import httpx2
from django.conf import settings
from django.utils import timezone

from prbench import egress
from providers.models import Price
from providers.registry import suggested_models

FALLBACK = Path(__file__).resolve().parent / "data" / "openrouter_models.json"
STALE_AFTER_S = 24 * 3600
REFRESH_HINT = "run `manage.py models refresh` to update it"
ALL_SUGGESTIONS_ID = "model-suggestions"


class CatalogError(Exception):
    pass


@dataclass(frozen=True)
class CatalogModel:
    id: str
    name: str
    context_length: int | None
    # None when unknown or variable: never a negative number (OpenRouter's "-1").
    input_per_mtok: Decimal | None
    output_per_mtok: Decimal | None
    variable_price: bool = False
    cached_input_per_mtok: Decimal | None = None  # pricing.input_cache_read
    cache_write_per_mtok: Decimal | None = None  # pricing.input_cache_write
    reasoning_per_mtok: Decimal | None = None  # pricing.internal_reasoning, when not 0

    def price_label(self, unit: str = "") -> str:
        """Per million tokens: "$3 in / $15 out" and the unit, "variable price" or "price unknown"."""
        if self.variable_price:
            return "variable price"
        if self.input_per_mtok is None or self.output_per_mtok is None:
            return "price unknown"
        return f"${self.input_per_mtok:f} in / ${self.output_per_mtok:f} out{unit}"


@dataclass(frozen=True)
class Listing:
    """The catalog as readers see it, with where it came from and when it was fetched."""

    models: list[CatalogModel]
    source: str  # "cache" or "fallback"
    fetched_at: float | None  # None for the shipped fallback
    as_of: str = ""  # the fallback's own date, as written in its file

    @property
    def age_s(self) -> float | None:
        return None if self.fetched_at is None else max(0.0, time.time() - self.fetched_at)

    @property
    def stale(self) -> bool:
        return self.age_s is None or self.age_s >= STALE_AFTER_S

    def describe(self) -> str:
        """One line on the list's age, e.g. "catalog fetched 3 days ago; run ... to update it"."""
        if self.age_s is None:
            as_of = f" from {self.as_of}" if self.as_of else ""
            return f"shipped catalog{as_of} (no list fetched yet); {REFRESH_HINT}"
        line = f"catalog fetched {_ago(self.age_s)}"
        return f"{line}; {REFRESH_HINT}" if self.stale else line


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


def listing() -> Listing:
    """The cached list at any age; the shipped fallback only when there is no usable cache."""
    cached = _read_cache()
    if cached is not None:
        return cached
    shipped = json.loads(FALLBACK.read_text())
    return Listing(_parse(shipped), "fallback", None, str(shipped.get("as_of") or ""))


def models() -> tuple[list[CatalogModel], str]:
    """The catalog and where it came from ("cache" at any age, else "fallback")."""
    current = listing()
    return current.models, current.source


def search(pattern: str, within: Listing | None = None) -> list[CatalogModel]:
    needle = pattern.lower()
    glob = any(ch in needle for ch in "*?[")
    found = [
        m
        for m in (within or listing()).models
        if (fnmatch.fnmatch(m.id.lower(), needle) if glob else needle in m.id.lower() or needle in m.name.lower())
    ]
    return sorted(found, key=lambda m: m.id)


def info(model_id: str, within: Listing | None = None) -> CatalogModel | None:
    return next((m for m in (within or listing()).models if m.id == model_id), None)


def listed_prices() -> list[Price]:
    """OpenRouter's list prices as unsaved catalog rows, one per model with a fixed price (a
    router priced "-1" has none), for ``pricing.catalog_price``. Only a fetched list prices
    anything: the shipped fallback's figures were written from memory."""
    current = listing()
    if current.source != "cache":
        return []
    source = f"OpenRouter model list ({current.describe()})"[:300]
    today = timezone.now().date()
    return [
        Price(
            provider="openrouter",
            model_pattern=m.id,
            input_per_mtok=m.input_per_mtok,
            output_per_mtok=m.output_per_mtok,
            cached_input_per_mtok=m.cached_input_per_mtok,
            cache_write_per_mtok=m.cache_write_per_mtok,
            reasoning_output_per_mtok=m.reasoning_per_mtok,
            valid_from=today,
            source=source,
        )
        for m in current.models
        if not m.variable_price and m.input_per_mtok is not None and m.output_per_mtok is not None
    ]


# Suggestions for the experiment form: one <datalist> per provider that has suggestions, and
# one with every id for a row whose provider has none (or is not chosen yet).


@dataclass(frozen=True)
class Suggestion:
    id: str
    label: str


@dataclass(frozen=True)
class SuggestionList:
    dom_id: str
    options: list[Suggestion]


@dataclass(frozen=True)
class Suggestions:
    lists: list[SuggestionList]
    note: str  # where the OpenRouter ids come from and how old they are


def suggestion_list_id(provider: str) -> str:
    """The datalist an arm's model input points at: its provider's, else the one with every id."""
    return f"{ALL_SUGGESTIONS_ID}-{provider}" if provider in _suggested_providers() else ALL_SUGGESTIONS_ID


def suggestions() -> Suggestions:
    current = listing()
    by_provider = {provider: [Suggestion(i, "") for i in ids] for provider, ids in suggested_models().items()}
    by_provider["openrouter"] = [
        Suggestion(m.id, f"{m.name} · {m.price_label(' per Mtok')}") for m in sorted(current.models, key=lambda m: m.id)
    ]
    every: dict[str, Suggestion] = {}
    for options in by_provider.values():
        every.update((s.id, s) for s in options if s.id not in every)
    lists = [SuggestionList(ALL_SUGGESTIONS_ID, list(every.values()))]
    lists += [SuggestionList(suggestion_list_id(p), options) for p, options in sorted(by_provider.items())]
    return Suggestions(lists, f"OpenRouter model ids: {current.describe()}.")


def _suggested_providers() -> set[str]:
    return {*suggested_models(), "openrouter"}


def _read_cache() -> Listing | None:
    path = cache_path()
    try:
        body = json.loads(path.read_text())
        modified = path.stat().st_mtime
    except (OSError, ValueError):
        return None
    parsed = _parse(body)
    return Listing(parsed, "cache", _fetched_at(body, modified)) if parsed else None


def _fetched_at(body: dict, modified: float) -> float:
    # The older of the recorded fetch time and the file's mtime: a copied cache (new mtime)
    # keeps its recorded age, and one without a usable record (or aged by hand) still has one.
    try:
        recorded = float(body["fetched_at"])
    except (KeyError, TypeError, ValueError):
        return modified
    return min(recorded, modified) if math.isfinite(recorded) else modified


def _ago(seconds: float) -> str:
    if seconds >= STALE_AFTER_S:
        days = int(seconds // STALE_AFTER_S)
        return f"{days} day{'s' if days != 1 else ''} ago"
    hours = int(seconds // 3600)
    return f"{hours} hour{'s' if hours != 1 else ''} ago" if hours else "less than an hour ago"


def _parse(body: object) -> list[CatalogModel]:
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return []
    parsed = []
    for entry in body["data"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        pricing = entry["pricing"] if isinstance(entry.get("pricing"), dict) else {}
        prompt, completion = pricing.get("prompt"), pricing.get("completion")
        parsed.append(
            CatalogModel(
                id=entry["id"],
                name=str(entry.get("name") or entry["id"]),
                context_length=entry.get("context_length") if isinstance(entry.get("context_length"), int) else None,
                input_per_mtok=_per_million(prompt),
                output_per_mtok=_per_million(completion),
                variable_price=_is_variable(prompt) or _is_variable(completion),
                cached_input_per_mtok=_per_million(pricing.get("input_cache_read")),
                cache_write_per_mtok=_per_million(pricing.get("input_cache_write")),
                reasoning_per_mtok=_per_million(pricing.get("internal_reasoning")) or None,
            )
        )
    return parsed


def _price(per_token: object) -> Decimal | None:
    if isinstance(per_token, bool) or not isinstance(per_token, (str, int, float)):
        return None
    try:
        value = Decimal(str(per_token))
    except (ArithmeticError, ValueError):
        return None
    return value if value.is_finite() else None


def _is_variable(per_token: object) -> bool:
    # OpenRouter prices a router whose model (so price) is chosen per request as "-1".
    value = _price(per_token)
    return value is not None and value < 0


def _per_million(per_token: object) -> Decimal | None:
    value = _price(per_token)
    if value is None or value < 0:
        return None
    return (value * 1_000_000).normalize()
