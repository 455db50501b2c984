"""Several credentials per provider, each with a name, addressed by a public code.

Existing rows become "default"; codes are filled in for them before the field turns unique.
"""

import uuid

from django.db import migrations, models


def fill_codes(apps, schema_editor):
    ProviderCredential = apps.get_model("providers", "ProviderCredential")
    for credential in ProviderCredential.objects.filter(code__isnull=True):
        credential.code = uuid.uuid4()
        credential.save(update_fields=["code"])


class Migration(migrations.Migration):
    dependencies = [
        ("orgs", "0001_initial"),
        ("providers", "0005_credential_rate_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="providercredential",
            name="name",
            field=models.CharField(default="default", help_text="What arms call it by", max_length=100),
        ),
        migrations.AddField(
            model_name="providercredential",
            name="code",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(fill_codes, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="providercredential",
            name="code",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
        migrations.RemoveConstraint(model_name="providercredential", name="one_credential_per_provider"),
        migrations.AddConstraint(
            model_name="providercredential",
            constraint=models.UniqueConstraint(
                fields=("org", "provider", "name"), name="one_credential_name_per_provider"
            ),
        ),
        migrations.AlterModelOptions(name="providercredential", options={"ordering": ["provider", "name"]}),
    ]
