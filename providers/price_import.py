"""Reading LiteLLM's published price list (``model_prices_and_context_window.json``, MIT)
into dated catalog rows, and the diff an import would make.

The file is a JSON object of model id -> facts; the ones used here are ``litellm_provider``,
``mode`` and the per-token prices ``input_cost_per_token``, ``output_cost_per_token``,
``cache_read_input_token_cost``, ``cache_creation_input_token_cost`` and
``output_cost_per_reasoning_token``. The catalog stores USD per million tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from prbench.inputs import NESTING_MAX, json_nesting

SNAPSHOT = Path(__file__).parent / "data" / "litellm_prices.json"
SOURCE = "LiteLLM model_prices_and_context_window.json"

# LiteLLM's provider names -> ours. Azure and OpenRouter ids carry the provider as a prefix
# ("azure/gpt-4o", "openrouter/openai/gpt-5"); ours are the id the arm names.
PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "azure": "azure_openai", "openrouter": "openrouter"}
PREFIXES = {"openai": "openai/", "anthropic": "anthropic/", "azure": "azure/", "openrouter": "openrouter/"}
MODES = {"chat", "responses", None}  # embeddings, images, audio... are not arms
FIELDS = {  # LiteLLM's key -> Price field; the first two are required for a row to be priced
    "input_cost_per_token": "input_per_mtok",
    "output_cost_per_token": "output_per_mtok",
    "cache_read_input_token_cost": "cached_input_per_mtok",
    "cache_creation_input_token_cost": "cache_write_per_mtok",
    "output_cost_per_reasoning_token": "reasoning_output_per_mtok",
}
PRICE_FIELDS = tuple(FIELDS.values())
MAX_PER_MTOK = Decimal("999999.999999")  # the column's range
PLACES = Decimal("0.000001")


class PriceFileError(ValueError):
    """Bad input, with the JSON path of the offending value."""


@dataclass(frozen=True)
class ImportedPrice:
    provider: str
    model: str
    prices: dict[str, Decimal | None]  # Price field -> USD per million tokens

    def key(self) -> tuple[str, str]:
        return (self.provider, self.model)


def _path(model_id: str, field: str = "") -> str:
    return f"$[{json.dumps(model_id)}]" + (f".{field}" if field else "")


def _per_mtok(entry: dict, model_id: str, field: str) -> Decimal | None:
    value = entry.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PriceFileError(f"{_path(model_id, field)}: expected a number of USD per token, got {json.dumps(value)}")
    try:
        per_mtok = (Decimal(str(value)) * 1_000_000).quantize(PLACES)
    except InvalidOperation:
        raise PriceFileError(f"{_path(model_id, field)}: {value!r} is not a price") from None
    if not Decimal(0) <= per_mtok <= MAX_PER_MTOK:
        raise PriceFileError(f"{_path(model_id, field)}: {value!r} is out of range (0 to 1 USD per token)")
    return per_mtok


def _our_model_id(litellm_provider: str, model_id: str) -> str | None:
    """The id an arm would name, or None for ids we cannot call by name: Azure's regional and
    deployment-type variants (``azure/eu/gpt-4o``) are priced per deployment, not per model."""
    name = model_id.removeprefix(PREFIXES[litellm_provider])
    if litellm_provider != "openrouter" and "/" in name:
        return None
    return name


def _entry(model_id: str, entry: Any) -> ImportedPrice | None:
    if not isinstance(entry, dict):
        raise PriceFileError(f"{_path(model_id)}: expected an object of prices, got {type(entry).__name__}")
    litellm_provider = entry.get("litellm_provider")
    if not isinstance(litellm_provider, str):
        raise PriceFileError(f"{_path(model_id, 'litellm_provider')}: expected a provider name")
    if litellm_provider not in PROVIDERS or entry.get("mode") not in MODES:
        return None
    prices = {ours: _per_mtok(entry, model_id, theirs) for theirs, ours in FIELDS.items()}
    model = _our_model_id(litellm_provider, model_id)
    if model is None or prices["input_per_mtok"] is None or prices["output_per_mtok"] is None:
        return None
    if len(model) > 200 or any(c in model for c in "*?[") or not model.isprintable():
        raise PriceFileError(f"{_path(model_id)}: not a model id we can store")
    return ImportedPrice(PROVIDERS[litellm_provider], model, prices)


def parse_price_file(data: Any) -> tuple[list[ImportedPrice], int]:
    """The rows for our providers, and how many entries were skipped (other providers,
    non-chat modes, unpriced entries, regional variants, ``sample_spec``)."""
    if not isinstance(data, dict):
        raise PriceFileError("$: expected a JSON object of model id -> prices")
    rows: dict[tuple[str, str], ImportedPrice] = {}
    skipped = 0
    for model_id, entry in data.items():
        row = None if model_id == "sample_spec" else _entry(model_id, entry)
        if row is None or row.key() in rows:  # the first spelling of an id wins
            skipped += 1
            continue
        rows[row.key()] = row
    return list(rows.values()), skipped


def read_price_text(text: str | bytes, name: str) -> tuple[list[ImportedPrice], int]:
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError:
        raise PriceFileError(f"{name}: not UTF-8 text") from None
    # Python's JSON parser recurses once per level: a deep file would end in RecursionError.
    # The real file is two levels deep (model id -> facts).
    if json_nesting(text) > NESTING_MAX:
        raise PriceFileError(
            f"{name}: nested more than {NESTING_MAX} levels deep; expected a JSON object of model id -> prices"
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PriceFileError(f"{name}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # an integer too long to convert
        raise PriceFileError(f"{name}: not JSON we can read: {exc}") from None
    return parse_price_file(data)


@dataclass(frozen=True)
class Change:
    row: ImportedPrice
    before: Any  # the Price row in force for this exact id, or None (a new row)


@dataclass(frozen=True)
class PriceDiff:
    new: list[Change]
    changed: list[Change]
    unchanged: int


def _figures(price: Any) -> dict[str, Decimal | None]:
    return {field: getattr(price, field) for field in PRICE_FIELDS}


def _same(before: dict[str, Decimal | None], after: dict[str, Decimal | None]) -> bool:
    return all(
        (b is None and a is None) or (b is not None and a is not None and Decimal(b) == Decimal(a))
        for b, a in ((before[f], after[f]) for f in PRICE_FIELDS)
    )


def diff_prices(price_model: Any, rows: list[ImportedPrice], valid_from: date) -> PriceDiff:
    """What importing ``rows`` as of ``valid_from`` would change, compared with the row of the
    same provider and id in force that day. ``price_model`` is the Price model (a migration
    passes its historical one)."""
    in_force: dict[tuple[str, str], Any] = {}
    for price in price_model.objects.filter(valid_from__lte=valid_from).order_by("valid_from"):
        in_force[(price.provider, price.model_pattern)] = price  # the newest wins
    new, changed, unchanged = [], [], 0
    for row in rows:
        before = in_force.get(row.key())
        if before is None:
            new.append(Change(row, None))
        elif _same(_figures(before), row.prices):
            unchanged += 1
        else:
            changed.append(Change(row, before))
    return PriceDiff(new, changed, unchanged)


def apply_diff(price_model: Any, diff: PriceDiff, valid_from: date, source: str) -> None:
    """Write the new and changed rows, dated ``valid_from``; the caller holds the transaction."""
    for change in [*diff.new, *diff.changed]:
        price_model.objects.update_or_create(
            provider=change.row.provider,
            model_pattern=change.row.model,
            valid_from=valid_from,
            defaults=change.row.prices | {"source": source[:300]},
        )
