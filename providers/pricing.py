from __future__ import annotations

import time
from datetime import date
from decimal import Decimal

from providers import catalog
from providers.models import Price
from providers.price_patterns import match_rank
from providers.types import Usage

PER_MILLION = Decimal(1_000_000)
CENT_FRACTION = Decimal("0.00000001")


def _charge(tokens: int, per_mtok: Decimal) -> Decimal:
    return Decimal(tokens) * per_mtok / PER_MILLION


def cost_parts(
    usage: Usage,
    price_input_per_mtok: Decimal,
    price_output_per_mtok: Decimal,
    price_cached_per_mtok: Decimal | None = None,
    price_cache_write_per_mtok: Decimal | None = None,
    price_reasoning_per_mtok: Decimal | None = None,
    price_cache_write_1h_per_mtok: Decimal | None = None,
) -> dict[str, Decimal]:
    """The cost of each part of the usage, in USD, unrounded. Cache reads and writes are
    parts of ``input_tokens`` (1-hour writes a part of the writes) and reasoning tokens part of
    ``output_tokens``: each is charged at its own price when the model has one, else as
    LiteLLM does: a 1-hour write at the cache write price, anything else at the plain input
    or output price."""
    cached = usage.cached_tokens if price_cached_per_mtok is not None else 0
    hour_tokens = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    hour_price = (
        price_cache_write_1h_per_mtok if price_cache_write_1h_per_mtok is not None else price_cache_write_per_mtok
    )
    written = usage.cache_write_tokens - hour_tokens if price_cache_write_per_mtok is not None else 0
    written_1h = hour_tokens if hour_price is not None else 0
    reasoning = usage.reasoning_tokens if price_reasoning_per_mtok is not None else 0
    parts = {
        "input": _charge(max(usage.input_tokens - cached - written - written_1h, 0), price_input_per_mtok),
        "output": _charge(max(usage.output_tokens - reasoning, 0), price_output_per_mtok),
    }
    if cached:
        parts["cache read"] = _charge(cached, price_cached_per_mtok)  # type: ignore[arg-type]
    if written:
        parts["cache write"] = _charge(written, price_cache_write_per_mtok)  # type: ignore[arg-type]
    if written_1h:
        parts["cache write 1h"] = _charge(written_1h, hour_price)  # type: ignore[arg-type]
    if reasoning:
        parts["reasoning"] = _charge(reasoning, price_reasoning_per_mtok)  # type: ignore[arg-type]
    return parts


def cost_for(
    usage: Usage,
    price_input_per_mtok: Decimal,
    price_output_per_mtok: Decimal,
    price_cached_per_mtok: Decimal | None = None,
    price_cache_write_per_mtok: Decimal | None = None,
    price_reasoning_per_mtok: Decimal | None = None,
) -> Decimal:
    """Cost in USD: input + cached read + cache write + output (+ reasoning where priced apart)."""
    prices = (price_cached_per_mtok, price_cache_write_per_mtok, price_reasoning_per_mtok)
    return _total(cost_parts(usage, price_input_per_mtok, price_output_per_mtok, *prices))


LONG_CONTEXT = (  # flat price -> its long-context tier's, in the order cost_parts takes them
    ("input_per_mtok", "long_input_per_mtok"),
    ("output_per_mtok", "long_output_per_mtok"),
    ("cached_input_per_mtok", "long_cached_input_per_mtok"),
    ("cache_write_per_mtok", "long_cache_write_per_mtok"),
    ("reasoning_output_per_mtok", ""),
    ("cache_write_1h_per_mtok", "long_cache_write_1h_per_mtok"),
)


def _rates(price: Price, prompt_tokens: int) -> list[Decimal | None]:
    """The row's prices for a call with this many prompt tokens (cache reads and writes
    included): past the long-context threshold every part is billed at the tier's price, a
    part the tier does not price at its plain one, as LiteLLM's cost_per_token does."""
    threshold = getattr(price, "long_context_above_tokens", None)
    long = threshold is not None and prompt_tokens > threshold
    rates = []
    for flat, tier in LONG_CONTEXT:
        tier_rate = getattr(price, tier, None) if long and tier else None
        rates.append(tier_rate if tier_rate is not None else getattr(price, flat, None))
    return rates


def price_cost(usage: Usage, price: Price) -> tuple[Decimal, dict[str, str]]:
    """The total cost at a catalog row's prices and its breakdown, as stored on an attempt."""
    parts = cost_parts(usage, *_rates(price, usage.input_tokens))  # type: ignore[arg-type]
    return _total(parts), {name: str(value.quantize(CENT_FRACTION)) for name, value in parts.items()}


def _total(parts: dict[str, Decimal]) -> Decimal:
    return sum(parts.values(), Decimal(0)).quantize(CENT_FRACTION)


CATALOG_TTL_S = 60.0
_catalog: dict[str, tuple[float, list]] = {}
OPENROUTER_LIST = "openrouter model list"  # its key in _catalog


def _prices(provider: str) -> list:
    """The provider's catalog rows, re-read at most once a minute per process: prices change
    rarely, every attempt needs one, and ``recompute_costs`` fixes up anything priced late."""
    loaded_at, rows = _catalog.get(provider, (0.0, []))
    if time.monotonic() - loaded_at > CATALOG_TTL_S:
        rows = list(Price.objects.filter(provider=provider))
        _catalog[provider] = (time.monotonic(), rows)
    return rows


def forget_catalog() -> None:
    _catalog.clear()


def catalog_price(provider: str, model_name: str, on: date):
    """The catalog entry in force for this model on that day, or None (price unknown). An
    OpenRouter model no catalog row prices (staff add one for a negotiated price) is priced
    from OpenRouter's own model list as ``models refresh`` last fetched it: LiteLLM's file no
    longer lists OpenRouter, and the list is what OpenRouter charges today."""
    candidates = []
    for price in _prices(provider):
        if price.valid_from <= on and (rank := match_rank(price.model_pattern, model_name)) is not None:
            candidates.append((rank, price.valid_from, price))
    if candidates:
        return max(candidates, key=lambda c: (c[0], c[1]))[2]
    return _openrouter_price(model_name) if provider == "openrouter" else None


def _openrouter_price(model_name: str):
    """OpenRouter's list price, re-read with the catalog's rows (at most once a minute)."""
    loaded_at, rows = _catalog.get(OPENROUTER_LIST, (0.0, []))
    if time.monotonic() - loaded_at > CATALOG_TTL_S:
        rows = catalog.listed_prices()
        _catalog[OPENROUTER_LIST] = (time.monotonic(), rows)
    return next((price for price in rows if price.model_pattern == model_name), None)


def catalog_cost(provider: str, model_name: str, usage: Usage, on: date) -> Decimal | None:
    price = catalog_price(provider, model_name, on)
    return None if price is None else price_cost(usage, price)[0]


def ceiling_cost(prompt_tokens: int, max_output_tokens: int, price: Price) -> Decimal:
    """The most a call with this prompt and output ceiling can cost, unrounded: each side at
    the dearest of its prices (a cache write costs more than plain input at Anthropic, and
    a model may price reasoning above plain output), since which applies is known only
    after the call; the long-context tier's when the prompt is past its threshold. One rule
    for the pre-run estimate and the budget's reservation."""
    plain, output, _, write, reasoning, write_1h = _rates(price, prompt_tokens)
    input_price = max(p for p in (plain, write, write_1h) if p is not None)
    output_price = max(p for p in (output, reasoning) if p is not None)
    return _charge(prompt_tokens, input_price) + _charge(max_output_tokens, output_price)
