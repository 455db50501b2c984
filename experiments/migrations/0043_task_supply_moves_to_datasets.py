import django.db.models.deletion
from django.db import migrations, models


MOVED = ["dataset", "taskinstance", "minedcandidate", "taskupload", "miningsource", "miningjob"]


def content_types_follow(apps, schema_editor):
    """Existing databases keep their permission rows and admin history: the content types of
    the moved models change app, rather than new ones being made beside them."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="experiments", model__in=MOVED).update(app_label="datasets")


def content_types_return(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="datasets", model__in=MOVED).update(app_label="experiments")


class Migration(migrations.Migration):
    """Dataset, TaskInstance, MinedCandidate, TaskUpload, MiningSource and MiningJob now belong to
    the datasets app. No table changes: only Django's state, and the content types."""

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("datasets", "0001_initial"),
        ("experiments", "0042_runarm_misconfigured"),
        ("leaderboards", "0005_task_is_a_datasets_model"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="miningjob",
                    name="dataset",
                ),
                migrations.RemoveField(
                    model_name="taskupload",
                    name="dataset",
                ),
                migrations.RemoveField(
                    model_name="taskinstance",
                    name="dataset",
                ),
                migrations.RemoveField(
                    model_name="minedcandidate",
                    name="dataset",
                ),
                migrations.AlterField(
                    model_name="experiment",
                    name="few_shot_dataset",
                    field=models.ForeignKey(
                        blank=True,
                        help_text="Where a few-shot prompt's {{examples}} are drawn from: a dev split, never the evaluated tasks",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="few_shot_for",
                        to="datasets.dataset",
                    ),
                ),
                migrations.AlterField(
                    model_name="experiment",
                    name="dataset",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="experiments", to="datasets.dataset"
                    ),
                ),
                migrations.RemoveField(
                    model_name="minedcandidate",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="miningjob",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="miningjob",
                    name="org",
                ),
                migrations.RemoveField(
                    model_name="miningjob",
                    name="source",
                ),
                migrations.RemoveField(
                    model_name="miningsource",
                    name="org",
                ),
                migrations.AlterField(
                    model_name="attempt",
                    name="task",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="attempts", to="datasets.taskinstance"
                    ),
                ),
                migrations.RemoveField(
                    model_name="taskupload",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="taskupload",
                    name="org",
                ),
                migrations.DeleteModel(
                    name="Dataset",
                ),
                migrations.DeleteModel(
                    name="MinedCandidate",
                ),
                migrations.DeleteModel(
                    name="MiningJob",
                ),
                migrations.DeleteModel(
                    name="MiningSource",
                ),
                migrations.DeleteModel(
                    name="TaskInstance",
                ),
                migrations.DeleteModel(
                    name="TaskUpload",
                ),
            ],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
