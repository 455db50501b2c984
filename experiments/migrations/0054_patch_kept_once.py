"""A pull request's patch is kept once, as the attempt's ``extracted_answer``: it was also
written as a "patch" artifact, the same text in a row of its own for every attempt, and an
inference-only attempt had a "validation" artifact too, empty, saying it was skipped (its run
says so). Both cost the hot path an artifact row per attempt (issue 31).

Attempts recorded before ``extracted_answer`` was kept get their patch copied into it; then
every patch artifact whose text the attempt now holds is deleted, and so are the empty
"skipped" validations of inference-only runs. A patch artifact that differs from its
attempt's answer (none should) is left where it is."""

from django.db import migrations
from django.db.models import F, OuterRef, Subquery


def keep_patches_once(apps, schema_editor) -> None:
    Attempt = apps.get_model("experiments", "Attempt")
    Artifact = apps.get_model("experiments", "Artifact")
    patches = Artifact.objects.filter(kind="patch")
    first_patch = patches.filter(attempt=OuterRef("pk")).order_by("pk").values("content")[:1]
    Attempt.objects.filter(extracted_answer="", artifacts__kind="patch").update(extracted_answer=Subquery(first_patch))
    patches.filter(content=F("attempt__extracted_answer")).delete()
    Artifact.objects.filter(
        kind="validation", status="skipped", content="", attempt__run__inference_only=True
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("experiments", "0053_lz4_compression")]

    operations = [migrations.RunPython(keep_patches_once, migrations.RunPython.noop)]
