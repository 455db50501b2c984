from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from prbench import crypto
from providers.models import ProviderCredential


class Command(BaseCommand):
    help = "Re-encrypt every stored API key with the newest key in PRBENCH_ENCRYPTION_KEYS."

    def handle(self, *args, **options):
        with transaction.atomic():
            credentials = list(ProviderCredential.objects.select_for_update().exclude(api_key_encrypted=""))
            for credential in credentials:
                try:
                    credential.api_key_encrypted = crypto.rotate(credential.api_key_encrypted)
                except crypto.DecryptionFailed:
                    raise CommandError(
                        f"credential {credential.pk} ({credential.provider}) cannot be decrypted with any "
                        "configured key; nothing was changed"
                    ) from None
            ProviderCredential.objects.bulk_update(credentials, ["api_key_encrypted"])
        self.stdout.write(f"re-encrypted {len(credentials)} credential(s) with the newest key")
