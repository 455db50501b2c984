from django.db import migrations

# A fold rewrites each of its arms' sketches (summaries.fold_recorded): hundreds of buckets, a
# few kilobytes, which Postgres compressed again at every chunk. Stored uncompressed (out of
# the row once it outgrows a page's quarter), the arms' upsert cost a third less CPU; the
# values read the same. Rows written before keep their compressed values until rewritten.
SKETCHES = ("latency_sketch", "first_token_sketch", "tokens_per_s_sketch")


def storage(kind):
    def alter(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            columns = ", ".join(f"ALTER COLUMN {name} SET STORAGE {kind}" for name in SKETCHES)
            schema_editor.execute(f"ALTER TABLE leaderboards_armsummary {columns}")

    return alter


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboards', '0007_summary_sketches'),
    ]

    operations = [
        migrations.RunPython(storage("EXTERNAL"), storage("EXTENDED")),
    ]
