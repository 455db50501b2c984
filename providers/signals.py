"""Any change to an org's allowlist or credentials, from the settings page, the admin or a
command, invalidates the governance that workers have cached (see policy.governance_version)."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from providers.models import AllowedProvider, ProviderCredential
from providers.policy import bump_governance_version


@receiver([post_save, post_delete], sender=AllowedProvider)
@receiver([post_save, post_delete], sender=ProviderCredential)
def governance_changed(sender, instance, **kwargs) -> None:
    bump_governance_version(instance.org_id)
