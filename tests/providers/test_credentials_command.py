"""manage.py credentials: headless provisioning, the key from standard input only."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from providers.models import ProviderCredential

KEY = "sk-operator-PIPED-abcdef0123456789"


def credentials(*args, stdin: str | None = None) -> str:
    out = io.StringIO()
    call_command("credentials", *args, stdout=out, stdin=io.StringIO(stdin) if stdin is not None else None)
    return out.getvalue()


def test_it_works(org):
    out = credentials(
        "add", "--org", "acme", "--provider", "openai_compatible", "--name", "vLLM on gpu-box",
        "--base-url", "https://gpu-box.acme.example/v1", "--key-stdin", stdin=KEY + "\n",
    )  # fmt: skip
    assert "added openai_compatible credential 'vLLM on gpu-box' to acme (key …6789)" in out and KEY not in out
    credential = ProviderCredential.objects.get(org=org)
    assert (credential.name, credential.base_url, credential.api_key()) == (
        "vLLM on gpu-box",
        "https://gpu-box.acme.example/v1",
        KEY,
    )
    credentials(
        "add", "--org", "acme", "--provider", "azure_openai", "--name", "eu",
        "--base-url", "https://acme.openai.azure.com", "--api-version", "2024-10-21",
        "--deployments", '{"gpt-4o": "prod-4o"}', "--key-stdin", stdin="sk-azure-99998888",
    )  # fmt: skip
    listing = credentials("list", "--org", "acme")
    assert "vLLM on gpu-box\topenai_compatible\thttps://gpu-box.acme.example/v1\tkey …6789" in listing
    assert "eu\tazure_openai\thttps://acme.openai.azure.com\tkey …8888\tapi-version 2024-10-21" in listing
    assert KEY not in listing and KEY[:-4] not in listing and "2 credential(s) in acme" in listing
    assert "removed azure_openai credential 'eu'" in credentials("remove", "--org", "acme", "--name", "eu")
    assert list(ProviderCredential.objects.values_list("name", flat=True)) == ["vLLM on gpu-box"]


def test_without_key_stdin_no_key_is_stored(org):
    credentials(
        "add", "--org", "acme", "--provider", "openai_compatible", "--name", "local", "--base-url", "http://llm:8000/v1"
    )
    assert ProviderCredential.objects.get().api_key_encrypted == ""


@pytest.mark.parametrize(
    "args, stdin, error",
    [
        (["add", "--org", "nope", "--provider", "openai", "--name", "x", "--key-stdin"], KEY, "org: no organisation"),
        (["add", "--org", "acme", "--provider", "openai", "--name", "x"], None, "api_key: required for a new"),
        (
            ["add", "--org", "acme", "--provider", "openai", "--name", "x", "--key-stdin"],
            " \n",
            "key: standard input was empty",
        ),
        (["add", "--org", "acme", "--provider", "openai", "--name", " ", "--key-stdin"], KEY, "name: required"),
        (
            ["add", "--org", "acme", "--provider", "openai", "--name", "x", "--key-stdin"],
            "x" * 600,
            "api_key: at most 512",
        ),
        (
            ["add", "--org", "acme", "--provider", "azure_openai", "--name", "x", "--key-stdin"],
            KEY,
            "Azure OpenAI needs",
        ),
        (
            ["add", "--org", "acme", "--provider", "openai", "--name", "x", "--deployments", "[1]", "--key-stdin"],
            KEY,
            "deployments: a JSON object",
        ),
        (
            ["add", "--org", "acme", "--provider", "openai", "--name", "x", "--base-url", "file:///etc", "--key-stdin"],
            KEY,
            "base_url: must start with http",
        ),
        (["add", "--org", "acme", "--provider", "skynet", "--name", "x"], None, "invalid choice: 'skynet'"),
        (["remove", "--org", "acme", "--name", "ghost"], None, "name: acme has no credential named 'ghost'"),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(org, args, stdin, error):
    with pytest.raises(CommandError) as caught:
        credentials(*args, stdin=stdin)
    assert error in str(caught.value)
    assert KEY not in str(caught.value)
    assert not ProviderCredential.objects.exists()


def test_duplicates_and_ambiguous_removals_are_refused(org):
    for provider in ("openai", "anthropic"):
        credentials("add", "--org", "acme", "--provider", provider, "--name", "main", "--key-stdin", stdin=KEY)
    with pytest.raises(CommandError, match="name: this organisation already has a openai credential named 'main'"):
        credentials(
            "add", "--org", "acme", "--provider", "openai", "--name", "main", "--key-stdin", stdin="sk-new-0000000000"
        )
    assert ProviderCredential.objects.get(provider="openai").api_key() == KEY
    with pytest.raises(CommandError, match=r"provider: several credentials are named 'main' \(anthropic, openai\)"):
        credentials("remove", "--org", "acme", "--name", "main")
    assert ProviderCredential.objects.count() == 2
    credentials("remove", "--org", "acme", "--name", "main", "--provider", "anthropic")
    assert list(ProviderCredential.objects.values_list("provider", flat=True)) == ["openai"]
