"""Credentials and allowlist pages, and the promise that a key never shows up anywhere."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client
from django.urls import reverse

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import Attempt
from orgs.models import Membership, Organization, Role
from providers.errors import ErrorCategory
from providers.models import AllowedProvider, ProviderCredential
from tests.conftest import client_for, work_queue
from tests.providers.fake_server import Reply

KEY = "sk-live-LEAKCHECK-9f8e7d6c5b4a"


def save_key(client, org, **fields):
    data = {"provider": "openai", "api_key": KEY, "base_url": "", "api_version": "", "deployments": ""} | fields
    return client.post(reverse("providers:save_credential", args=[org.code]), data)


def code_of(org, provider="openai"):
    return str(ProviderCredential.objects.get(org=org, provider=provider).code)


def test_it_works(alice, bob, org):
    response = save_key(client_for(alice), org)
    assert response.status_code == 302
    credential = ProviderCredential.objects.get(org=org, provider="openai")
    assert credential.api_key() == KEY and KEY not in credential.api_key_encrypted
    assert credential.key_last_four == KEY[-4:]
    page = client_for(bob).get(reverse("providers:settings", args=[org.code]))
    assert page.status_code == 200
    content = page.content.decode()
    assert f"…{KEY[-4:]}" in content and KEY not in content and KEY[:-4] not in content


def test_an_empty_key_keeps_the_stored_one(alice, org):
    client = client_for(alice)
    save_key(client, org)
    save_key(client, org, credential=code_of(org), api_key="", name="renamed")
    credential = ProviderCredential.objects.get(org=org)
    assert credential.api_key() == KEY and credential.name == "renamed"
    # Not when it would point the key somewhere else (tests/providers/test_key_stays_put.py).
    save_key(client, org, credential=code_of(org), api_key="", base_url="https://proxy.example.com/v1")
    credential.refresh_from_db()
    assert credential.api_key() == KEY and credential.base_url == ""


def test_rate_limits_are_saved_shown_and_cleared(alice, org):
    client = client_for(alice)
    response = save_key(client, org, requests_per_minute="60", tokens_per_minute=" 90000 ")
    assert response.status_code == 302
    credential = ProviderCredential.objects.get(org=org)
    assert (credential.requests_per_minute, credential.tokens_per_minute) == (60, 90000)
    content = client.get(reverse("providers:settings", args=[org.code])).content.decode()
    assert '<td class="num">60</td><td class="num">90000</td>' in content
    save_key(client, org, credential=code_of(org), api_key="", requests_per_minute="", tokens_per_minute="")
    credential.refresh_from_db()
    assert (credential.requests_per_minute, credential.tokens_per_minute) == (None, None)
    content = client.get(reverse("providers:settings", args=[org.code])).content.decode()
    assert '<td class="num">no limit</td><td class="num">no limit</td>' in content


def test_editing_a_credential_prefills_everything_but_the_key(alice, bob, org):
    client = client_for(alice)
    deployments = json.dumps({"gpt-4o": "prod-4o"})
    save_key(
        client, org, provider="azure_openai", base_url="https://acme.openai.azure.com", api_version="2024-10-21",
        deployments=deployments, requests_per_minute="60",
    )  # fmt: skip
    url = reverse("providers:settings", args=[org.code]) + "?edit=" + code_of(org, "azure_openai")
    content = client.get(url).content.decode()
    assert '<input type="hidden" name="provider" value="azure_openai">' in content  # no switching mid-edit
    assert 'value="https://acme.openai.azure.com"' in content and 'value="2024-10-21"' in content
    assert 'value="{&quot;gpt-4o&quot;: &quot;prod-4o&quot;}"' in content and 'name="requests_per_minute"' in content
    assert 'placeholder="no limit" value="60"' in content
    assert KEY not in content and KEY[:-4] not in content
    # Re-saving the pre-filled form as a browser would, with the key left empty, keeps it all.
    save_key(
        client, org, provider="azure_openai", api_key="", base_url="https://acme.openai.azure.com",
        api_version="2024-10-21", deployments=deployments, requests_per_minute="60", name="default",
        credential=code_of(org, "azure_openai"),
    )  # fmt: skip
    credential = ProviderCredential.objects.get(org=org, provider="azure_openai")
    assert credential.api_key() == KEY and credential.deployments == {"gpt-4o": "prod-4o"}
    assert credential.requests_per_minute == 60
    # A member cannot open the form at all, pre-filled or not.
    assert "credential-form" not in client_for(bob).get(url).content.decode()
    # Another org's credential is never what ?edit= finds.
    other = Organization.objects.create(slug="other", name="Other")
    theirs = ProviderCredential.objects.create(org=other, provider="openai", base_url="https://other.example.com")
    content = client.get(reverse("providers:settings", args=[org.code]) + f"?edit={theirs.code}").content.decode()
    assert "other.example.com" not in content and "Editing" not in content


def test_staff_edit_rate_limits_in_the_admin(alice, org):
    save_key(client_for(alice), org)
    alice.is_staff = alice.is_superuser = True
    alice.save()
    credential = ProviderCredential.objects.get(org=org)
    url = reverse("admin:providers_providercredential_change", args=[credential.pk])
    form = {
        "org": org.pk,
        "provider": "openai",
        "name": "default",
        "base_url": "",
        "api_version": "",
        "deployments": "{}",
    }
    response = client_for(alice).post(url, form | {"requests_per_minute": "0", "tokens_per_minute": ""})
    assert response.status_code == 200  # the form again, with the error
    assert "Ensure this value is greater than or equal to 1." in response.content.decode()
    response = client_for(alice).post(url, form | {"requests_per_minute": "500", "tokens_per_minute": "30000"})
    assert response.status_code == 302
    credential.refresh_from_db()
    assert (credential.requests_per_minute, credential.tokens_per_minute) == (500, 30000)
    assert credential.api_key() == KEY


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"provider": "skynet"}, "provider: choose one of"),
        ({"provider": "azure_openai"}, "Azure OpenAI needs an endpoint"),
        ({"provider": "http_agent"}, "an agent service needs its endpoint (base_url)"),
        ({"provider": "http_agent", "base_url": "http://127.0.0.1:9/agent", "api_key": ""}, "api_key: required"),
        ({"deployments": "[1, 2]"}, "deployments: a JSON object"),
        ({"base_url": "ftp://x"}, "base_url: must start with http"),
        ({"api_key": ""}, "api_key: required for a new credential"),
        ({"requests_per_minute": "0"}, "requests_per_minute: a whole number from 1"),
        ({"requests_per_minute": "-5"}, "requests_per_minute: a whole number from 1"),
        ({"tokens_per_minute": "1.5"}, "tokens_per_minute: a whole number from 1"),
        ({"tokens_per_minute": "lots"}, "tokens_per_minute: a whole number from 1"),
        ({"tokens_per_minute": "3000000000"}, "tokens_per_minute: a whole number from 1"),
    ],
)
def test_bad_credentials_are_refused_with_the_field(alice, org, fields, error):
    response = save_key(client_for(alice), org, **fields)
    assert response.status_code == 302
    assert not ProviderCredential.objects.exists()
    messages = [str(m) for m in response.wsgi_request._messages]
    assert any(error in m for m in messages), messages


def test_members_and_viewers_cannot_change_settings(bob, vera, org):
    for user in (bob, vera):
        assert save_key(client_for(user), org).status_code == 403
        response = client_for(user).post(reverse("providers:allow", args=[org.code]), {"provider": "mock"})
        assert response.status_code == 403
    assert not ProviderCredential.objects.exists() and not AllowedProvider.objects.exists()


def test_it_checks_ownership(charlie, alice, org):
    save_key(client_for(alice), org)
    client = client_for(charlie)
    urls = [
        reverse("providers:settings", args=[org.code]),
        reverse("providers:save_credential", args=[org.code]),
        reverse("providers:test_connection", args=[org.code, code_of(org)]),
        reverse("providers:delete_credential", args=[org.code, code_of(org)]),
        reverse("providers:allow", args=[org.code]),
    ]
    for url in urls:
        assert client.get(url).status_code in (404, 405)
        assert client.post(url, {"provider": "openai", "api_key": "stolen"}).status_code == 404
    assert ProviderCredential.objects.get(org=org).api_key() == KEY


def test_the_allowlist_is_edited_and_enforced_when_saving_an_experiment(alice, org, dataset):
    client = client_for(alice)
    response = client.post(
        reverse("providers:allow", args=[org.code]), {"provider": "mock", "model_patterns": "mock-a*\n"}
    )
    assert response.status_code == 302
    assert AllowedProvider.objects.get(org=org).patterns() == ["mock-a*"]
    form = {
        "name": "Governed",
        "description": "",
        "dataset": str(dataset.pk),
        "sample_size": "",
        "sample_strategy": "first",
        "sample_seed": "1",
        "repetitions": "1",
        "prompt_template": "{{problem_statement}}",
        "arms-TOTAL_FORMS": "1",
        "arms-INITIAL_FORMS": "0",
        "arms-MIN_NUM_FORMS": "0",
        "arms-MAX_NUM_FORMS": "1000",
        "arms-0-label": "rogue",
        "arms-0-provider": "mock",
        "arms-0-model_name": "mock-b",
        "arms-0-config": "{}",
    }
    response = client.post(reverse("experiments:create"), form)
    assert response.status_code == 200
    assert "Arm &#x27;rogue&#x27;: not_allowed: model &#x27;mock-b&#x27; does not match" in response.content.decode()
    form["arms-0-model_name"] = "mock-a1"
    assert client.post(reverse("experiments:create"), form).status_code == 302


def test_an_arm_disallowed_after_saving_fails_at_execution_without_a_call(
    experiment, org, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, inference_only=True)
    AllowedProvider.objects.create(org=org, provider="openai")  # the mock is no longer allowed
    work_queue()
    assert set(run.attempts.values_list("status", "error_category")) == {("failed", ErrorCategory.NOT_ALLOWED)}


def test_test_connection_reports_the_category(alice, org, fake):
    client = client_for(alice)
    save_key(client, org, base_url=fake.url + "/v1")
    fake.script(Reply(401, {"error": {"message": "Incorrect API key provided: sk-live-****5b4a"}}))
    url = reverse("providers:test_connection", args=[org.code, code_of(org)])
    response = client.post(url, {"model": "gpt-4o-mini"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    content = response.content.decode()
    assert "authentication" in content and KEY not in content and "<html" not in content
    assert fake.seen[-1].body["max_completion_tokens"] == 1 and "max_tokens" not in fake.seen[-1].body
    fake.script(
        Reply(
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )
    )
    response = client.post(url, {"model": ""}, HTTP_HX_REQUEST="true")
    assert "OK" in response.content.decode() and fake.seen[-1].body["model"] == "gpt-4.1-mini"


def test_the_key_never_leaks(alice, org, experiment, fake, caplog, django_capture_on_commit_callbacks):
    """Not in a page, the admin, a log record, an exception message or a stored raw record."""
    caplog.set_level(logging.DEBUG)
    client = client_for(alice)
    save_key(client, org, base_url=fake.url + "/v1")
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 1, "retry_base_ms": 1})])
    fake.default = Reply(401, {"error": {"message": "Incorrect API key provided"}})
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, inference_only=True)
    work_queue()
    attempts = list(Attempt.objects.filter(run=run))
    assert {a.error_category for a in attempts} == {ErrorCategory.AUTHENTICATION}
    assert all(KEY in seen.headers["authorization"] for seen in fake.seen)  # it was really used
    stored = json.dumps([[a.request, a.raw_response, a.error_message, a.output] for a in attempts])
    assert KEY not in stored
    assert KEY not in caplog.text and KEY[4:] not in caplog.text
    alice.is_staff = alice.is_superuser = True
    alice.save()
    staff = Client()
    staff.force_login(alice)
    credential = ProviderCredential.objects.get(org=org)
    pages = [
        client.get(reverse("providers:settings", args=[org.code])),
        client.get(reverse("experiments:run", args=[run.code])),
        client.get(reverse("experiments:attempt", args=[attempts[0].code])),
        client.get(reverse("experiments:detail", args=[experiment.code])),
        staff.get(reverse("admin:providers_providercredential_change", args=[credential.pk])),
        staff.get(reverse("admin:providers_providercredential_changelist")),
        staff.get(reverse("admin:experiments_attempt_change", args=[attempts[0].pk])),
    ]
    for page in pages:
        assert page.status_code == 200
        assert KEY not in page.content.decode() and KEY[:-4] not in page.content.decode()
    assert KEY not in repr(credential) and KEY not in str(credential)


def test_only_owners_and_admins_see_the_forms(bob, org):
    Membership.objects.filter(user=bob, org=org).update(role=Role.MEMBER)
    page = client_for(bob).get(reverse("providers:settings", args=[org.code])).content.decode()
    assert "Save credential" not in page and "Only admins and owners" in page


# --- several named credentials per provider, addressed by code ---------------------------


def test_several_credentials_per_provider_each_edited_deleted_and_tested_by_code(alice, org, fake):
    client = client_for(alice)
    save_key(client, org, name="prod", base_url=fake.url + "/v1")
    save_key(client, org, name="staging", api_key="sk-staging-key-00000000", base_url="https://staging.example.com/v1")
    prod = ProviderCredential.objects.get(org=org, name="prod")
    staging = ProviderCredential.objects.get(org=org, name="staging")
    content = client.get(reverse("providers:settings", args=[org.code])).content.decode()
    assert f"?edit={prod.code}" in content and f"?edit={staging.code}" in content
    response = save_key(client, org, name="prod", api_key="sk-another-000000000")
    assert any(
        "this organisation already has a openai credential named 'prod'" in str(m)
        for m in response.wsgi_request._messages
    )
    save_key(
        client, org, credential=str(staging.code), api_key="sk-staging-key-00000000", name="staging-eu",
        base_url="https://eu.example.com",
    )  # fmt: skip
    staging.refresh_from_db()
    assert (staging.name, staging.base_url, staging.api_key()) == (
        "staging-eu",
        "https://eu.example.com",
        "sk-staging-key-00000000",
    )
    fake.default = Reply(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
    response = client.post(reverse("providers:test_connection", args=[org.code, prod.code]), {"model": ""})
    assert response.status_code == 302 and len(fake.seen) == 1  # prod's endpoint, not staging's
    assert KEY in fake.seen[0].headers["authorization"]
    response = client.post(reverse("providers:delete_credential", args=[org.code, staging.code]))
    assert response.status_code == 302
    assert list(ProviderCredential.objects.filter(org=org).values_list("name", flat=True)) == ["prod"]


def test_unknown_and_foreign_codes_and_providers_are_404(alice, bob, vera, org):
    client = client_for(alice)
    save_key(client, org)
    other = Organization.objects.create(slug="other", name="Other")
    theirs = ProviderCredential.objects.create(org=other, provider="openai", name="theirs")
    for code in ("00000000-0000-0000-0000-000000000000", str(theirs.code)):
        for name in ("providers:test_connection", "providers:delete_credential"):
            assert client.post(reverse(name, args=[org.code, code])).status_code == 404
        assert save_key(client, org, credential=code).status_code == 404
    assert save_key(client, org, credential="not-a-uuid").status_code == 404
    assert client.get(reverse("providers:settings", args=[org.code]) + "?edit=junk").status_code == 200
    # A NUL byte never reaches the view: the input layer answers 400 first.
    assert client.get(reverse("providers:settings", args=[org.code]) + "?edit=%00junk").status_code == 400
    assert client.post(reverse("providers:disallow", args=[org.code, "skynet"])).status_code == 404
    assert ProviderCredential.objects.filter(pk=theirs.pk).exists()
    ours = ProviderCredential.objects.get(org=org)
    for user in (bob, vera):
        for name in ("providers:test_connection", "providers:delete_credential"):
            assert client_for(user).post(reverse(name, args=[org.code, ours.code])).status_code == 403
    assert ProviderCredential.objects.filter(org=org).count() == 1


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"api_key": "sk-" + "x" * 600}, "api_key: at most 512 characters"),
        ({"api_key": "sk-abc def-1234567"}, "api_key: must not contain spaces"),
        ({"name": "n" * 101}, "name: required, at most 100 characters"),
        ({"base_url": "https://x.example.com/" + "p" * 500}, "base_url: at most 500 characters"),
        ({"api_version": "v" * 41}, "api_version: at most 40 characters"),
    ],
)
def test_lengths_are_capped_with_a_clear_error(alice, org, fields, error):
    response = save_key(client_for(alice), org, **fields)
    assert response.status_code == 302
    assert not ProviderCredential.objects.exists()
    assert any(error in str(m) for m in response.wsgi_request._messages)


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"name": "prod\u202egpt"}, "name: contains a bidirectional override"),
        ({"name": "prod\x1bgpt"}, "name: contains a control character"),
        ({"deployments": "[" * 5000 + "]" * 5000}, "deployments: a JSON object"),
        ({"deployments": '{"gpt-4o": "a", "gpt-4o": "b"}'}, "deployments: a JSON object"),
        ({"deployments": '{"gpt-4o": "prod\\u0000"}'}, "deployments: a JSON object"),
    ],
)
def test_bad_text_is_refused_by_the_input_layer(alice, org, fields, error):
    response = save_key(client_for(alice), org, **fields)
    assert response.status_code == 302
    assert not ProviderCredential.objects.exists()
    assert any(error in str(m) for m in response.wsgi_request._messages)


def test_allowlist_patterns_refuse_control_characters(alice, org):
    response = client_for(alice).post(
        reverse("providers:allow", args=[org.code]), {"provider": "openai", "model_patterns": "gpt-4o*\n\x1b[31m"}
    )
    assert response.status_code == 302
    assert not AllowedProvider.objects.exists()
    assert any("model_patterns: contains a control character" in str(m) for m in response.wsgi_request._messages)
