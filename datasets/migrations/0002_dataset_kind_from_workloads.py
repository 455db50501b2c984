import evaluation.workloads
from django.db import migrations, models


class Migration(migrations.Migration):
    """Dataset.kind's choices come from the workload registry (a callable): a new kind needs no migration."""

    dependencies = [
        ('datasets', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='dataset',
            name='kind',
            field=models.CharField(choices=evaluation.workloads.kind_choices, default='pr_patch', max_length=32),
        ),
    ]
