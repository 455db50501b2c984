"""Summary pages half filled, so a fold's update of a row fits beside it (a HOT update): every
fold updates its arms' rows and its chunk's (arm, task) rows, and on full pages each update
went to another page with an entry in each of the table's indexes (six for the task
summaries: 99.8% of their updates at a million attempts, two fifths of a fold's CPU).
Only pages written from now on keep the room (a rebuild writes its arms' rows anew)."""

from django.db import migrations

TABLES = ("leaderboards_tasksummary", "leaderboards_armsummary")


def fillfactor(value):
    def alter(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for table in TABLES:
                schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {value})")

    return alter


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboards', '0009_sketches_as_arrays'),
    ]

    operations = [
        migrations.RunPython(fillfactor(50), fillfactor(100)),
    ]
