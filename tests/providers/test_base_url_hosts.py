"""A base URL's host must be a name the HTTP layer can send: internationalised labels valid
IDNA 2008, no empty or over-long labels. Refused at save with the field named, nothing stored."""

from __future__ import annotations

import pytest
from django.urls import reverse

from prbench.egress import url_problem
from providers.models import ProviderCredential
from tests.conftest import client_for

KEY = "sk-live-HOSTCHECK-5a6b7c8d"


def save(client, org, base_url):
    data = {"provider": "openai", "api_key": KEY, "base_url": base_url, "api_version": "", "deployments": ""}
    return client.post(reverse("providers:save_credential", args=[org.code]), data)


@pytest.mark.parametrize(
    "base_url, problem",
    [
        ("https://xn--zz.example/", "host label 'xn--zz' is not a valid internationalised name"),
        ("https://xn--ls8h.example/v1", "host label 'xn--ls8h' is not a valid internationalised name"),  # an emoji
        ("https://ex\u00e4mple..com/v1", "has an empty label"),
        ("https://.example.com/v1", "has an empty label"),
        ("https://" + "a" * 64 + ".example.com/v1", "is longer than 63 characters"),
        ("https://" + "\u00e4" * 60 + ".example/v1", "is not a valid internationalised name"),  # too long once encoded
        ("https://pay\u200dpal.example/v1", "is not a valid internationalised name"),  # a joiner
        ("https://\u0661x.example/v1", "is not a valid internationalised name"),  # mixed directions
        ("https://\uff45xample.com/v1", "is not a valid internationalised name"),  # fullwidth, not IDNA 2008
        ("https://" + "ab." * 90 + "com/v1", "host is longer than 253 characters"),
    ],
)
def test_an_invalid_host_is_refused_with_the_field(alice, org, base_url, problem):
    response = save(client_for(alice), org, base_url)
    assert response.status_code == 302
    assert not ProviderCredential.objects.exists()
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any("base_url: " in m and problem in m for m in messages), messages
    assert not any(KEY in m for m in messages)


@pytest.mark.parametrize(
    "base_url",
    [
        "https://b\u00fccher.example/v1",  # an internationalised name, as typed
        "https://xn--bcher-kva.example/v1",  # the same, as sent
        "https://fa\u00df.example/v1",  # IDNA 2008 keeps the sharp s
        "https://api.example.com./v1",  # fully qualified
        "http://vllm_server:8000/v1",  # a container's name: not a strict host name, but it resolves
    ],
)
def test_a_valid_host_is_saved(alice, org, base_url):
    response = save(client_for(alice), org, base_url)
    assert response.status_code == 302
    assert ProviderCredential.objects.get(org=org).base_url == base_url


def test_the_price_import_url_is_judged_the_same_way():
    assert "not a valid internationalised name" in (url_problem("https://xn--zz.example/prices.json") or "")
    assert url_problem("https://b\u00fccher.example/prices.json") is None
