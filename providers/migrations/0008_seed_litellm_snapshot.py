"""Replace the first seed's globs with explicit rows from the shipped LiteLLM snapshot.

The globs over-matched: ``claude-opus-4*`` priced Opus 4.5 at Opus 4's $15/$75 and
``o4-mini*`` caught ``o4-mini-deep-research``. Explicit ids now price each model, and dated
snapshots (``gpt-4.1-2025-04-14``) find their family's row without a glob. The rows are
dated like the first seed, 2025-01-01: they correct figures, they are not price changes, so
``recompute_costs`` re-prices past attempts with them. Staff-made rows are left alone.
"""

from datetime import date

from django.db import migrations

FIRST_SEED_DAY = date(2025, 1, 1)
FIRST_SEED_SOURCE = "provider's public pricing page"


def seed(apps, schema_editor):
    from providers.price_import import FIRST_SNAPSHOT, seed_snapshot

    Price = apps.get_model("providers", "Price")
    Price.objects.filter(valid_from=FIRST_SEED_DAY, source=FIRST_SEED_SOURCE, model_pattern__contains="*").delete()
    seed_snapshot(Price, FIRST_SEED_DAY, FIRST_SNAPSHOT, version="")


class Migration(migrations.Migration):
    dependencies = [("providers", "0007_price_cache_write_reasoning")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
