import django.db.models.deletion
from django.db import migrations, models

# Each verdict gets its attempt's run; an attempt never changes run, so the copy stays right.
BACKFILL = """
UPDATE evaluation_verdict AS verdict SET run_id = attempt.run_id
FROM experiments_attempt AS attempt WHERE attempt.id = verdict.attempt_id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0001_initial"),
        ("experiments", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="verdict",
            name="run",
            field=models.ForeignKey(
                null=True,
                editable=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="experiments.run",
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop, elidable=True),
        migrations.AlterField(
            model_name="verdict",
            name="run",
            field=models.ForeignKey(
                editable=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="experiments.run"
            ),
        ),
        migrations.AddIndex(
            model_name="verdict",
            index=models.Index(fields=["run", "profile", "status"], name="evaluation__run_id_89c1d9_idx"),
        ),
    ]
