"""The price catalog from LiteLLM's published price list.

``prices import FILE_OR_URL`` reads ``model_prices_and_context_window.json`` (a file, a URL
fetched through the egress policy, or ``snapshot`` for the copy shipped in providers/data),
prints what would change, and writes new and changed rows dated ``--valid-from`` (today by
default), all or nothing. Historic attempts keep the price in force when they ran; run
``recompute_costs`` to re-price them after correcting an old date.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.core.management.base import CommandError
from django.db import transaction
from django.utils import timezone
from tqdm import tqdm

from prbench.inputs import CheckedCommand, read_input_file
from providers import egress
from providers.models import Price
from providers.price_import import (
    SNAPSHOT,
    SOURCE,
    ImportedPrice,
    PriceDiff,
    PriceFileError,
    apply_diff,
    diff_prices,
    read_price_text,
)
from providers.pricing import catalog_price, forget_catalog

FETCH_TIMEOUT_S = 60.0
MAX_BYTES = 64 * 1024 * 1024  # the real file is about 1.5 MB
LONG = 200  # rows; above this the write shows a progress bar


class Command(CheckedCommand):
    help = "Import prices from LiteLLM's model_prices_and_context_window.json (file, URL or 'snapshot')."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        load = sub.add_parser("import", help="add dated catalog rows for new and changed prices")
        load.add_argument("source", help="a file path, an http(s) URL, or 'snapshot' for the shipped copy")
        load.add_argument("--valid-from", default="", help="YYYY-MM-DD the prices apply from (default: today)")
        load.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")

    def handle(self, *args, action, source, valid_from, dry_run, **options):
        day = _day(valid_from)
        rows, skipped = _read(source)
        forget_catalog()
        diff = diff_prices(Price, rows, day)
        self._report(diff, rows, skipped, day)
        if dry_run:
            self.stdout.write("dry run: nothing written")
            return
        self._write(diff, day, f"{SOURCE} ({source})")
        forget_catalog()
        self.stdout.write(self.style.SUCCESS(f"wrote {len(diff.new) + len(diff.changed)} price row(s) from {day}"))

    def _write(self, diff: PriceDiff, day: date, source: str) -> None:
        changes = [*diff.new, *diff.changed]
        with transaction.atomic():
            for start in tqdm(range(0, len(changes), 100), disable=len(changes) <= LONG, unit="batch"):
                batch = changes[start : start + 100]
                apply_diff(Price, PriceDiff(batch, [], 0), day, source)

    def _report(self, diff: PriceDiff, rows: list[ImportedPrice], skipped: int, day: date) -> None:
        self.stdout.write(
            f"{len(rows)} price(s) for our providers ({skipped} other entries skipped): "
            f"{len(diff.new)} new, {len(diff.changed)} changed, {diff.unchanged} unchanged"
        )
        if diff.changed:
            self.stdout.write("\nchanged (USD per Mtok, input / cache read / cache write / output):")
            for change in diff.changed:
                self.stdout.write(f"  {_name(change.row)}: {_figures(change.before)} -> {_figures(change.row)}")
        # A new row also changes what a model costs when a broader row priced it until now.
        broader = [(c.row, catalog_price(c.row.provider, c.row.model, day)) for c in diff.new]
        repriced = [(row, before) for row, before in broader if before is not None]
        if repriced:
            self.stdout.write("\nnew rows replacing a broader match:")
            for row, before in repriced:
                self.stdout.write(f"  {_name(row)}: {before.model_pattern} {_figures(before)} -> {_figures(row)}")


def _name(row: ImportedPrice) -> str:
    return f"{row.provider}/{row.model}"


def _figures(price) -> str:
    prices = price.prices if isinstance(price, ImportedPrice) else vars(price)
    parts = ("input_per_mtok", "cached_input_per_mtok", "cache_write_per_mtok", "output_per_mtok")
    text = " / ".join(_usd(prices.get(p)) for p in parts)
    reasoning = prices.get("reasoning_output_per_mtok")
    return text + (f" (reasoning {_usd(reasoning)})" if reasoning is not None else "")


def _usd(value: Decimal | None) -> str:
    return "-" if value is None else f"{value.normalize():f}"


def _day(text: str) -> date:
    if not text:
        return timezone.now().date()
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--valid-from {text!r}: expected a date as YYYY-MM-DD") from None


def _read(source: str) -> tuple[list[ImportedPrice], int]:
    try:
        return read_price_text(_fetch(source), source)
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
