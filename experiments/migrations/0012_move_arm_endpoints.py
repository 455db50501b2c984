"""Arms no longer carry endpoints: what an arm's config redirected moves into a named
credential of the arm's organisation, the arm names that credential, and every routing key
leaves its config.

Only what the adapters really read moves: an OpenAI-compatible arm's ``base_url`` and an
Azure arm's ``deployment`` (with its ``api_version``, if given). Other routing keys were
never read and are dropped. A credential whose endpoint came from an arm gets no key: the
organisation's stored key must not follow a URL a member typed, so an owner sets one (a
local server that needs none keeps working, as before). Arms that redirected nothing are
pinned to the organisation's only credential for their provider, so the migrated
credentials added beside it leave them unambiguous.
"""

from __future__ import annotations

import json
from collections import defaultdict
from urllib.parse import urlsplit

from django.db import migrations

# Frozen copy of providers.adapters.config.ROUTING_KEYS as of this migration.
ROUTING_KEYS = frozenset(
    {
        "base_url", "api_base", "base", "url", "host", "endpoint", "azure_endpoint", "api_version",
        "deployment", "deployment_name", "azure_deployment", "deployments", "organization", "project",
        "api_key", "azure_ad_token", "azure_ad_token_provider", "auth_token", "default_headers",
        "extra_headers", "headers", "default_query", "extra_query", "proxy", "proxies", "http_client",
        "websocket_base_url", "credential",
    }
)  # fmt: skip
NAME_MAX, BASE_URL_MAX, API_VERSION_MAX = 100, 500, 40


def move_arm_endpoints(apps, schema_editor):
    Credential = apps.get_model("providers", "ProviderCredential")
    ModelArm = apps.get_model("experiments", "ModelArm")
    RunArm = apps.get_model("experiments", "RunArm")
    existing = defaultdict(list)
    for credential in Credential.objects.order_by("pk"):
        existing[(credential.org_id, credential.provider)].append(credential)
    own = {key: found[0] for key, found in existing.items() if len(found) == 1}
    made: dict[tuple, str] = {}
    arms = [(arm, arm.experiment.org_id) for arm in ModelArm.objects.select_related("experiment")]
    arms += [(arm, arm.run.org_id) for arm in RunArm.objects.select_related("run")]
    for arm, org_id in arms:
        config = arm.config if isinstance(arm.config, dict) else {}
        name = _credential_for(Credential, arm, org_id, config, own.get((org_id, arm.provider)), made)
        if name is None and not arm.credential_name and (org_id, arm.provider) in own:
            name = own[(org_id, arm.provider)].name
        if name is not None:
            arm.credential_name = name
        arm.config = {k: v for k, v in config.items() if k not in ROUTING_KEYS}
        arm.save(update_fields=["credential_name", "config"])


def _text(config: dict, key: str) -> str:
    value = config.get(key)
    return value.strip() if isinstance(value, str) else ""


def _credential_for(Credential, arm, org_id, config, own, made) -> str | None:
    """The credential now holding what this arm's config redirected; None when it
    redirected nothing the adapters read."""
    if arm.provider == "openai_compatible" and _text(config, "base_url").startswith(("http://", "https://")):
        base_url, api_version, deployments = _text(config, "base_url")[:BASE_URL_MAX], "", {}
    elif arm.provider == "azure_openai" and _text(config, "deployment"):
        deployment, api_version = _text(config, "deployment"), _text(config, "api_version")[:API_VERSION_MAX]
        if own is not None and _merge_deployment(own, arm.model_name, deployment, api_version):
            return own.name
        base_url = own.base_url if own is not None else ""
        api_version = api_version or (own.api_version if own is not None else "")
        deployments = {arm.model_name: deployment}
    else:
        return None
    if own is not None and (own.base_url, own.api_version, own.deployments or {}) == (
        base_url,
        api_version,
        deployments,
    ):
        return own.name
    key = (org_id, arm.provider, base_url, api_version, json.dumps(deployments, sort_keys=True))
    if key not in made:
        name = _free_name(Credential, org_id, arm.provider, f"migrated: {urlsplit(base_url).netloc or arm.provider}")
        Credential.objects.create(
            org_id=org_id,
            provider=arm.provider,
            name=name,
            base_url=base_url,
            api_version=api_version,
            deployments=deployments,
        )  # no key: see the module's docstring
        made[key] = name
    return made[key]


def _merge_deployment(own, model_name: str, deployment: str, api_version: str) -> bool:
    """Add the arm's deployment to the org's credential when nothing there disagrees."""
    deployments = dict(own.deployments or {})
    if deployments.get(model_name, deployment) != deployment or api_version not in ("", own.api_version):
        return False
    if deployments.get(model_name) != deployment:
        own.deployments = deployments | {model_name: deployment}
        own.save(update_fields=["deployments"])
    return True


def _free_name(Credential, org_id, provider, wanted: str) -> str:
    wanted = wanted[: NAME_MAX - 6]
    taken = set(Credential.objects.filter(org_id=org_id, provider=provider).values_list("name", flat=True))
    name, number = wanted, 1
    while name in taken:
        number += 1
        name = f"{wanted} ({number})"
    return name


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0011_arm_credential_name"),
        ("providers", "0006_credential_names"),
    ]

    operations = [migrations.RunPython(move_arm_endpoints, migrations.RunPython.noop)]
