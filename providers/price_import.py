"""Reading LiteLLM's published price list (``model_prices_and_context_window.json``, MIT)
into dated catalog rows, and the diff an import would make.

The file is a JSON object of model id -> facts; the ones used here are ``litellm_provider``,
``mode``, the per-token prices in FIELDS and one long-context tier (``*_above_272k_tokens``
and the like: past that many prompt tokens every token of the call is billed at the tier's
price, as LiteLLM's ``cost_per_token`` does). The catalog stores USD per million tokens.

The file is read as published: an entry that cannot become a row for one of our providers
(``sample_spec``, an ``alias_of`` entry without a provider, other providers, embeddings or
images, a malformed row) is skipped and counted by reason, never stops the import. The shipped
copy (providers/data/litellm_prices.json) is the subset of LiteLLM 1.110.2's file that
imports, written by ``manage.py prices snapshot FILE``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from prbench.inputs import NESTING_MAX, json_nesting
from providers.registry import litellm_providers

SNAPSHOT = Path(__file__).parent / "data" / "litellm_prices.json"
SNAPSHOT_VERSION = "LiteLLM 1.110.2, "
# What migration 0008 seeded, kept so that a fresh install goes through the same rows as an
# upgraded one: LiteLLM's current file no longer lists retired models (Claude Sonnet 4, Opus
# 4.1, 3.7 Sonnet ...), which arms may still name.
FIRST_SNAPSHOT = Path(__file__).parent / "data" / "litellm_prices_0008.json"
SOURCE = "LiteLLM model_prices_and_context_window.json"

# LiteLLM's provider names -> ours, as each provider declares its own (``litellm_provider``).
# Azure and OpenRouter ids carry the provider as a prefix ("azure/gpt-4o",
# "openrouter/openai/gpt-5"); ours are the id the arm names.
PROVIDERS = litellm_providers()
PREFIXES = {theirs: f"{theirs}/" for theirs in PROVIDERS}
MODES = {"chat", "responses", None}  # embeddings, images, audio... are not arms
FIELDS = {  # LiteLLM's key -> Price field; the first two are required for a row to be priced
    "input_cost_per_token": "input_per_mtok",
    "output_cost_per_token": "output_per_mtok",
    "cache_read_input_token_cost": "cached_input_per_mtok",
    "cache_creation_input_token_cost": "cache_write_per_mtok",
    "cache_creation_input_token_cost_above_1hr": "cache_write_1h_per_mtok",  # Anthropic's 1-hour cache
    "output_cost_per_reasoning_token": "reasoning_output_per_mtok",
}
# The long-context tier's keys are these with ``_above_<N>[k]_tokens`` appended.
LONG_FIELDS = {
    "input_cost_per_token": "long_input_per_mtok",
    "output_cost_per_token": "long_output_per_mtok",
    "cache_read_input_token_cost": "long_cached_input_per_mtok",
    "cache_creation_input_token_cost": "long_cache_write_per_mtok",
    "cache_creation_input_token_cost_above_1hr": "long_cache_write_1h_per_mtok",
}
TIER_KEY = re.compile(rf"^({'|'.join(LONG_FIELDS)})_above_(\d+)(k?)_tokens$")
PRICE_FIELDS = (*FIELDS.values(), *LONG_FIELDS.values())
ROW_FIELDS = (*PRICE_FIELDS, "long_context_above_tokens")
MAX_PER_MTOK = Decimal("999999.999999")  # the column's range
MAX_THRESHOLD = 2**31 - 1  # a PositiveIntegerField
PLACES = Decimal("0.000001")

# Why an entry was skipped, as the import reports it.
SAMPLE_SPEC = "LiteLLM's sample_spec (documentation, not a model)"
NO_PROVIDER = "no litellm_provider (an alias_of entry or the like)"
OTHER_PROVIDER = "another provider"
NOT_CHAT = "not a chat model (embedding, image, audio ...)"
VARIANT = "a regional or deployment-type variant (priced per deployment)"
UNPRICED = "no per-token input and output price"
DUPLICATE = "an id already read under another spelling"
MALFORMED = "malformed"


class PriceFileError(ValueError):
    """Bad input, with the JSON path of the offending value."""


class SkippedEntry(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class ImportedPrice:
    provider: str
    model: str
    prices: dict[str, Any]  # Price field -> USD per million tokens (the tier's threshold: tokens)

    def key(self) -> tuple[str, str]:
        return (self.provider, self.model)


@dataclass
class ParsedFile:
    rows: list[ImportedPrice]
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> entries
    malformed: list[str] = field(default_factory=list)  # each malformed entry, by JSON path

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def _path(model_id: str, key: str = "") -> str:
    return f"$[{json.dumps(model_id)}]" + (f".{key}" if key else "")


def _per_mtok(entry: dict, model_id: str, key: str) -> Decimal | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SkippedEntry(
            MALFORMED, f"{_path(model_id, key)}: expected a number of USD per token, got {json.dumps(value)}"
        )
    try:
        per_mtok = (Decimal(str(value)) * 1_000_000).quantize(PLACES)
    except InvalidOperation:
        raise SkippedEntry(MALFORMED, f"{_path(model_id, key)}: {value!r} is not a price") from None
    if not Decimal(0) <= per_mtok <= MAX_PER_MTOK:
        raise SkippedEntry(MALFORMED, f"{_path(model_id, key)}: {value!r} is out of range (0 to 1 USD per token)")
    return per_mtok


def _long_context_tier(entry: dict, model_id: str) -> dict[str, Any]:
    """The tier's threshold and prices. A field the tier does not price stays None and the
    flat price applies to it, as in LiteLLM."""
    tiers: dict[int, dict[str, Decimal | None]] = {}
    for key in entry:
        if match := TIER_KEY.match(key):
            base, number, thousands = match.groups()
            threshold = int(number) * (1000 if thousands else 1)
            tiers.setdefault(threshold, {})[LONG_FIELDS[base]] = _per_mtok(entry, model_id, key)
    if not tiers:
        return {}
    if len(tiers) > 1:  # none of our providers' entries has two; LiteLLM would bill the highest crossed
        raise SkippedEntry(MALFORMED, f"{_path(model_id)}: more than one long-context tier ({sorted(tiers)} tokens)")
    ((threshold, prices),) = tiers.items()
    if not 0 < threshold <= MAX_THRESHOLD:
        raise SkippedEntry(MALFORMED, f"{_path(model_id)}: a long-context tier above {threshold} tokens")
    return {"long_context_above_tokens": threshold} | prices


def _our_model_id(litellm_provider: str, model_id: str) -> str | None:
    """The id an arm would name, or None for ids we cannot call by name: Azure's regional and
    deployment-type variants (``azure/eu/gpt-4o``) are priced per deployment, not per model."""
    name = model_id.removeprefix(PREFIXES[litellm_provider])
    if litellm_provider != "openrouter" and "/" in name:
        return None
    return name


def _entry(model_id: str, entry: Any) -> ImportedPrice:
    """The entry's row, or SkippedEntry saying why there is none."""
    if model_id == "sample_spec":
        raise SkippedEntry(SAMPLE_SPEC)
    if not isinstance(entry, dict):
        raise SkippedEntry(MALFORMED, f"{_path(model_id)}: expected an object of prices, got {type(entry).__name__}")
    litellm_provider = entry.get("litellm_provider")
    if litellm_provider is None:
        raise SkippedEntry(NO_PROVIDER)
    if not isinstance(litellm_provider, str):
        raise SkippedEntry(MALFORMED, f"{_path(model_id, 'litellm_provider')}: expected a provider name")
    if litellm_provider not in PROVIDERS:
        raise SkippedEntry(OTHER_PROVIDER)
    if entry.get("mode") not in MODES:
        raise SkippedEntry(NOT_CHAT)
    model = _our_model_id(litellm_provider, model_id)
    if model is None:
        raise SkippedEntry(VARIANT)
    prices: dict[str, Any] = {ours: _per_mtok(entry, model_id, theirs) for theirs, ours in FIELDS.items()}
    prices |= {ours: None for ours in LONG_FIELDS.values()} | {"long_context_above_tokens": None}
    prices |= _long_context_tier(entry, model_id)
    if prices["input_per_mtok"] is None or prices["output_per_mtok"] is None:
        raise SkippedEntry(UNPRICED)
    if len(model) > 200 or any(c in model for c in "*?[") or not model.isprintable():
        raise SkippedEntry(MALFORMED, f"{_path(model_id)}: not a model id we can store")
    return ImportedPrice(PROVIDERS[litellm_provider], model, prices)


def parse_price_file(data: Any) -> ParsedFile:
    """The rows for our providers, and every other entry counted by why it was skipped."""
    if not isinstance(data, dict):
        raise PriceFileError("$: expected a JSON object of model id -> prices")
    parsed = ParsedFile([])
    seen: set[tuple[str, str]] = set()
    for model_id, entry in data.items():
        try:
            row = _entry(model_id, entry)
            if row.key() in seen:  # the first spelling of an id wins
                raise SkippedEntry(DUPLICATE)
        except SkippedEntry as skip:
            parsed.skipped[skip.reason] += 1
            if skip.reason == MALFORMED:
                parsed.malformed.append(skip.detail)
            continue
        seen.add(row.key())
        parsed.rows.append(row)
    return parsed


def usable_entries(data: dict) -> dict[str, Any]:
    """The entries of a published file that import, as published: the shipped snapshot."""
    kept = {}
    for model_id, entry in data.items():
        try:
            _entry(model_id, entry)
        except SkippedEntry:
            continue
        kept[model_id] = entry
    return kept


def load_price_json(text: str | bytes, name: str) -> Any:
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError:
        raise PriceFileError(f"{name}: not UTF-8 text") from None
    # Python's JSON parser recurses once per level: a deep file would end in RecursionError.
    # The real file is three levels deep (model id -> facts -> a few per-size prices).
    if json_nesting(text) > NESTING_MAX:
        raise PriceFileError(
            f"{name}: nested more than {NESTING_MAX} levels deep; expected a JSON object of model id -> prices"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PriceFileError(f"{name}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # an integer too long to convert
        raise PriceFileError(f"{name}: not JSON we can read: {exc}") from None


def read_price_text(text: str | bytes, name: str) -> ParsedFile:
    return parse_price_file(load_price_json(text, name))


@dataclass(frozen=True)
class Change:
    row: ImportedPrice
    before: Any  # the Price row in force for this exact id, or None (a new row)


@dataclass(frozen=True)
class PriceDiff:
    new: list[Change]
    changed: list[Change]
    unchanged: list[Change]


def model_fields(price_model: Any) -> tuple[str, ...]:
    """The row's fields this Price model has: a migration's historical model may predate some."""
    names = {f.name for f in price_model._meta.get_fields()}
    return tuple(f for f in ROW_FIELDS if f in names)


def _same(before: Any, after: dict[str, Any], fields: tuple[str, ...]) -> bool:
    def equal(b: Any, a: Any) -> bool:
        return (b is None and a is None) or (b is not None and a is not None and Decimal(b) == Decimal(a))

    return all(equal(getattr(before, f), after.get(f)) for f in fields)


def diff_prices(price_model: Any, rows: list[ImportedPrice], valid_from: date) -> PriceDiff:
    """What importing ``rows`` as of ``valid_from`` would change, compared with the row of the
    same provider and id in force that day. ``price_model`` is the Price model (a migration
    passes its historical one)."""
    fields = model_fields(price_model)
    in_force: dict[tuple[str, str], Any] = {}
    for price in price_model.objects.filter(valid_from__lte=valid_from).order_by("valid_from"):
        in_force[(price.provider, price.model_pattern)] = price  # the newest wins
    new, changed, unchanged = [], [], []
    for row in rows:
        before = in_force.get(row.key())
        if before is None:
            new.append(Change(row, None))
        elif _same(before, row.prices, fields):
            unchanged.append(Change(row, before))
        else:
            changed.append(Change(row, before))
    return PriceDiff(new, changed, unchanged)


def apply_diff(price_model: Any, diff: PriceDiff, valid_from: date, source: str) -> None:
    """Write the new and changed rows, dated ``valid_from``; the caller holds the transaction."""
    fields = model_fields(price_model)
    for change in [*diff.new, *diff.changed]:
        price_model.objects.update_or_create(
            provider=change.row.provider,
            model_pattern=change.row.model,
            valid_from=valid_from,
            defaults={f: change.row.prices.get(f) for f in fields} | {"source": source[:300]},
        )


def seed_snapshot(
    price_model: Any, valid_from: date, snapshot: Path = SNAPSHOT, version: str = SNAPSHOT_VERSION
) -> None:
    """A shipped snapshot into the catalog as of ``valid_from`` (what the seed migrations do)."""
    rows = read_price_text(snapshot.read_bytes(), snapshot.name).rows
    diff = diff_prices(price_model, rows, valid_from)
    apply_diff(price_model, diff, valid_from, f"{SOURCE} ({version}snapshot shipped with PRBench)")
