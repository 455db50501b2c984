from __future__ import annotations

import time
from datetime import date
from decimal import Decimal

from providers.types import Usage

PER_MILLION = Decimal(1_000_000)
CENT_FRACTION = Decimal("0.00000001")


def cost_for(
    usage: Usage,
    price_input_per_mtok: Decimal,
    price_output_per_mtok: Decimal,
    price_cached_per_mtok: Decimal | None = None,
) -> Decimal:
    """Cost in USD. Cached input tokens are part of ``input_tokens`` and, when the model has
    a cached price, are charged at it instead of the full input price."""
    cached = usage.cached_tokens if price_cached_per_mtok is not None else 0
    cost = (usage.input_tokens - cached) * price_input_per_mtok + usage.output_tokens * price_output_per_mtok
    if cached:
        cost += cached * price_cached_per_mtok  # type: ignore[operator]
    return (cost / PER_MILLION).quantize(CENT_FRACTION)


CATALOG_TTL_S = 60.0
_catalog: dict[str, tuple[float, list]] = {}


def _prices(provider: str) -> list:
    """The provider's catalog rows, re-read at most once a minute per process: prices change
    rarely, every attempt needs one, and ``recompute_costs`` fixes up anything priced late."""
    from providers.models import Price

    loaded_at, rows = _catalog.get(provider, (0.0, []))
    if time.monotonic() - loaded_at > CATALOG_TTL_S:
        rows = list(Price.objects.filter(provider=provider))
        _catalog[provider] = (time.monotonic(), rows)
    return rows


def forget_catalog() -> None:
    _catalog.clear()


def catalog_price(provider: str, model_name: str, on: date):
    """The catalog entry in force for this model on that day, or None (price unknown)."""
    candidates = [p for p in _prices(provider) if p.valid_from <= on and p.matches(model_name)]
    if not candidates:
        return None
    return max(candidates, key=lambda p: (p.specificity, p.valid_from))


def catalog_cost(provider: str, model_name: str, usage: Usage, on: date) -> Decimal | None:
    price = catalog_price(provider, model_name, on)
    if price is None:
        return None
    return cost_for(usage, price.input_per_mtok, price.output_per_mtok, price.cached_input_per_mtok)
