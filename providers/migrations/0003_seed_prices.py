"""Seed the price catalog with public list prices (USD per million tokens).

Staff keep it current in the admin: a new price is a new row with a later valid_from,
so historic attempts keep the price that was in force when they ran.
"""

from datetime import date
from decimal import Decimal

from django.db import migrations

SOURCE = "provider's public pricing page"
PRICES = [
    # provider, pattern, input, output, cached input
    ("openai", "gpt-4o", "2.50", "10.00", "1.25"),
    ("openai", "gpt-4o-2024-*", "2.50", "10.00", "1.25"),
    ("openai", "gpt-4o-mini*", "0.15", "0.60", "0.075"),
    ("openai", "gpt-4.1", "2.00", "8.00", "0.50"),
    ("openai", "gpt-4.1-mini*", "0.40", "1.60", "0.10"),
    ("openai", "gpt-4.1-nano*", "0.10", "0.40", "0.025"),
    ("openai", "o3", "2.00", "8.00", "0.50"),
    ("openai", "o4-mini*", "1.10", "4.40", "0.275"),
    ("azure_openai", "gpt-4o", "2.50", "10.00", "1.25"),
    ("azure_openai", "gpt-4o-mini*", "0.15", "0.60", "0.075"),
    ("azure_openai", "gpt-4.1", "2.00", "8.00", "0.50"),
    ("anthropic", "claude-opus-4*", "15.00", "75.00", "1.50"),
    ("anthropic", "claude-sonnet-4*", "3.00", "15.00", "0.30"),
    ("anthropic", "claude-3-7-sonnet*", "3.00", "15.00", "0.30"),
    ("anthropic", "claude-3-5-haiku*", "0.80", "4.00", "0.08"),
    ("anthropic", "claude-haiku-4*", "1.00", "5.00", "0.10"),
]


def seed(apps, schema_editor):
    Price = apps.get_model("providers", "Price")
    for provider, pattern, price_in, price_out, cached in PRICES:
        Price.objects.get_or_create(
            provider=provider,
            model_pattern=pattern,
            valid_from=date(2025, 1, 1),
            defaults={
                "input_per_mtok": Decimal(price_in),
                "output_per_mtok": Decimal(price_out),
                "cached_input_per_mtok": Decimal(cached),
                "source": SOURCE,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("providers", "0002_price_catalog")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
