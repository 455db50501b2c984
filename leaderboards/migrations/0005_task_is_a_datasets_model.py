import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """TaskSummary.task points at the task model's new home; the column and its constraint stay."""

    dependencies = [
        ("datasets", "0001_initial"),
        ("leaderboards", "0004_armsummary_configuration_failures"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="tasksummary",
                    name="task",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="datasets.taskinstance"
                    ),
                ),
            ],
        ),
    ]
