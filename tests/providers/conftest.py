"""The provider tests' fixtures: the adapters' contract set-up (``wire``: one per provider) and
the strict server's (``setup``); ``fake``, the local server itself, is in tests/conftest.py."""

from __future__ import annotations

import pytest

from orgs.models import Organization
from providers.models import ProviderCredential
from tests.providers.contracts import KEY, WIRES
from tests.providers.refusals import credential_for, strict_openai


@pytest.fixture(params=sorted(WIRES))
def wire(request, fake, db):
    spec = WIRES[request.param]
    org = Organization.objects.create(slug=f"org-{request.param.replace('_', '-')}", name="Org")
    credential = ProviderCredential(
        org=org,
        provider=spec.provider,
        base_url=fake.url + spec.base_suffix,
        api_version=spec.api_version,
        deployments=spec.deployments or {},
    )
    credential.set_api_key(KEY)
    credential.save()
    return spec, org


@pytest.fixture
def setup(fake, org):
    def make(provider: str, responder=strict_openai) -> Organization:
        fake.responder = responder
        credential_for(org, provider, fake.url + ("" if provider in ("anthropic", "azure_openai") else "/v1"))
        return org

    return make
