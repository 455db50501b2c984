"""The price catalog from LiteLLM's published price list.

``prices import FILE_OR_URL`` reads ``model_prices_and_context_window.json`` (a file, a URL
fetched through the egress policy, or ``snapshot`` for the copy shipped in providers/data),
prints the table of what it adds, changes and leaves unchanged, old -> new, and the entries it
skipped by reason (a malformed one named by its JSON path), then writes new and changed rows
dated ``--valid-from`` (today by default), all or nothing; ``--dry-run`` writes nothing.
Historic attempts keep the price in force when they ran; run ``recompute_costs`` to re-price
them after correcting an old date.

``prices snapshot FILE`` rewrites the shipped copy from a published file: the entries that
import, as published. A new migration then seeds them (see 0009).
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

from django.core.management.base import CommandError
from django.db import transaction
from django.utils import timezone
from tqdm import tqdm

from prbench import egress
from prbench.inputs import CheckedCommand, read_input_file
from providers.models import Price
from providers.price_import import (
    MALFORMED,
    SNAPSHOT,
    SOURCE,
    Change,
    ImportedPrice,
    ParsedFile,
    PriceDiff,
    PriceFileError,
    apply_diff,
    diff_prices,
    load_price_json,
    parse_price_file,
    usable_entries,
)
from providers.pricing import catalog_price, forget_catalog

FETCH_TIMEOUT_S = 60.0
MAX_BYTES = 64 * 1024 * 1024  # the real file is about 3.5 MB (LiteLLM 1.110.2)
LONG = 200  # rows; above this the write shows a progress bar


class Command(CheckedCommand):
    help = "Import prices from LiteLLM's model_prices_and_context_window.json (file, URL or 'snapshot')."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        load = sub.add_parser("import", help="add dated catalog rows for new and changed prices")
        load.add_argument("source", help="a file path, an http(s) URL, or 'snapshot' for the shipped copy")
        load.add_argument("--valid-from", default="", help="YYYY-MM-DD the prices apply from (default: today)")
        load.add_argument("--dry-run", action="store_true", help="print the table of changes, write nothing")
        snapshot = sub.add_parser("snapshot", help="rewrite the shipped copy from a published file")
        snapshot.add_argument("source", help="a file path or an http(s) URL of model_prices_and_context_window.json")

    def handle(self, *args, action, source, **options):
        if action == "snapshot":
            return self._snapshot(source)
        day = _day(options["valid_from"])
        parsed = _parse(_read(source), source)
        forget_catalog()
        diff = diff_prices(Price, parsed.rows, day)
        self._report(diff, parsed, day)
        if options["dry_run"]:
            self.stdout.write("dry run: nothing written")
            return
        self._write(diff, day, f"{SOURCE} ({source})")
        forget_catalog()
        self.stdout.write(self.style.SUCCESS(f"wrote {len(diff.new) + len(diff.changed)} price row(s) from {day}"))

    def _snapshot(self, source: str) -> None:
        data = _load(_read(source), source)
        if not isinstance(data, dict):
            raise CommandError(f"{source}: expected a JSON object of model id -> prices")
        kept = usable_entries(data)
        SNAPSHOT.write_text(json.dumps(kept, indent=1, sort_keys=False) + "\n")
        self.stdout.write(
            f"wrote {len(kept)} of {len(data)} entries to {SNAPSHOT}; "
            "add a migration that calls price_import.seed_snapshot so installs get them"
        )

    def _write(self, diff: PriceDiff, day: date, source: str) -> None:
        changes = [*diff.new, *diff.changed]
        with transaction.atomic():
            for start in tqdm(range(0, len(changes), 100), disable=len(changes) <= LONG, unit="batch"):
                batch = changes[start : start + 100]
                apply_diff(Price, PriceDiff(batch, [], []), day, source)

    def _report(self, diff: PriceDiff, parsed: ParsedFile, day: date) -> None:
        self.stdout.write(
            f"{len(parsed.rows)} price(s) for our providers: "
            f"{len(diff.new)} added, {len(diff.changed)} changed, {len(diff.unchanged)} unchanged; "
            f"{parsed.skipped_total} entries skipped"
        )
        for reason, count in parsed.skipped.most_common():
            self.stdout.write(f"  skipped {count}: {reason}")
        for problem in parsed.malformed:
            self.stdout.write(f"  {MALFORMED}: {problem}")
        self.stdout.write(f"\n{'':10}{'model':45} USD per Mtok: input / cache read / cache write / output, old -> new")
        for status, changes in (("added", diff.new), ("changed", diff.changed), ("unchanged", diff.unchanged)):
            for change in changes:
                figures = _figures(change.row) if status == "unchanged" else _old_to_new(change, day)
                self.stdout.write(f"{status:10}{_name(change.row):45} {figures}")


def _old_to_new(change: Change, day: date) -> str:
    if change.before is not None:
        return f"{_figures(change.before)} -> {_figures(change.row)}"
    # A new row also changes what a model costs when a broader row priced it until now.
    broader = catalog_price(change.row.provider, change.row.model, day)
    old = "-" if broader is None else f"{_figures(broader)} (as {broader.model_pattern})"
    return f"{old} -> {_figures(change.row)}"


def _name(row: ImportedPrice) -> str:
    return f"{row.provider}/{row.model}"


def _figures(price: Any) -> str:
    prices = price.prices if isinstance(price, ImportedPrice) else vars(price)
    parts = ("input_per_mtok", "cached_input_per_mtok", "cache_write_per_mtok", "output_per_mtok")
    text = " / ".join(_usd(prices.get(p)) for p in parts)
    if (hour := prices.get("cache_write_1h_per_mtok")) is not None:
        text += f" (1h cache write {_usd(hour)})"
    if (reasoning := prices.get("reasoning_output_per_mtok")) is not None:
        text += f" (reasoning {_usd(reasoning)})"
    if (threshold := prices.get("long_context_above_tokens")) is not None:
        long = (
            "long_input_per_mtok",
            "long_cached_input_per_mtok",
            "long_cache_write_per_mtok",
            "long_output_per_mtok",
        )
        text += f" (above {threshold} tokens: {' / '.join(_usd(prices.get(p)) for p in long)})"
    return text


def _usd(value: Decimal | None) -> str:
    return "-" if value is None else f"{value.normalize():f}"


def _day(text: str) -> date:
    if not text:
        return timezone.now().date()
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--valid-from {text!r}: expected a date as YYYY-MM-DD") from None


def _read(source: str) -> bytes:
    return _fetch(source)


def _load(text: bytes, source: str) -> Any:
    try:
        return load_price_json(text, source)
    except PriceFileError as exc:
        raise CommandError(str(exc)) from None


def _parse(text: bytes, source: str) -> ParsedFile:
    try:
        return parse_price_file(_load(text, source))
    except PriceFileError as exc:
        raise CommandError(str(exc)) from None


def _fetch(source: str) -> bytes:
    if source == "snapshot":
        return SNAPSHOT.read_bytes()
    if source.startswith(("http://", "https://")):
        return _download(source)
    return read_input_file(source, MAX_BYTES)


def _download(url: str) -> bytes:
    """Through the egress client: the same address policy as every provider call."""
    if problem := egress.url_problem(url):
        raise CommandError(f"{url}: {problem}")
    try:
        with egress.http_client(FETCH_TIMEOUT_S) as client, client.stream("GET", url) as response:
            if response.status_code != 200:
                raise CommandError(f"{url}: HTTP {response.status_code}")
            data = b""
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > MAX_BYTES:
                    raise CommandError(f"{url}: larger than {MAX_BYTES // (1024 * 1024)} MB")
            return data
    except CommandError:
        raise
    except Exception as exc:
        refusal = egress.refusal_in(exc)
        raise CommandError(f"{url}: {refusal or type(exc).__name__}") from None
