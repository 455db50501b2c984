"""prbench/redaction.py, and where it is applied: the gateway's errors and completions,
Test connection, flash messages, log records and the DEBUG error page of a credential save."""

from __future__ import annotations

import logging

import pytest
from django.contrib import messages
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import reverse

from prbench.redaction import (
    MARKER,
    RedactingFilter,
    known_secrets,
    redact_answer,
    redact_data,
    redact_text,
    remember_secret,
)
from providers import gateway
from providers.actions import CredentialInput, do_test_connection
from providers.errors import ErrorCategory, ProviderError
from providers.models import ProviderCredential
from providers.types import ArmSpec, CompletionRequest, Message
from tests.conftest import client_for
from tests.providers.echo_provider import LOOKALIKE, EchoProvider

KEY = "sk-proj-" + "Zq7Rm2Kx9Vb4Nw6Ht1Lc8Pf3Jd5Gs0Ya7Eu2Io9Tr4Wn6Mh1Qb"
AZURE_KEY = "4f9c2a7e1b8d4c6fa3e5b7d9c1f2a4e6" + "Bq3Xv8Lm2Np7Rt4Ws9Yz1Kc6Hd0Jf5Gg2Ah8Tu3Ei7Or1Pw"
REQUEST = CompletionRequest(messages=(Message("user", "Fix the bug."),), seed_key="1:t:a:0")


def test_key_shaped_tokens_leave_error_text():
    cases = {
        f"Incorrect API key provided: {KEY}. You can find it": f"Incorrect API key provided: {MARKER}. You can find it",
        "invalid x-api-key: sk-ant-api03-Q2w3E4r5T6y7U8i9O0pAsDfGh": f"invalid x-api-key: {MARKER}",
        "key sk-or-v1-0f1e2d3c4b5a69788796a5b4c3d2e1f0 refused": f"key {MARKER} refused",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0": f"Authorization: Bearer {MARKER}",
        '{"api-key": "4f9c2a7e1b8d4c6fa3e5b7d9c1f2a4e6"}': f'{{"api-key": "{MARKER}"}}',
        "GET /models?api-key=4f9c2a7e1b8d4c6fa3e5b7d9c1f2a4e6&x=1": f"GET /models?api-key={MARKER}&x=1",
        "ocp-apim-subscription-key: 4f9c2a7e1b8d4c6fa3e5b7d9c1f2a4e6": f"ocp-apim-subscription-key: {MARKER}",
        "KEY=prb_Zx3kQ9-vB7_wLm2Np5Rt8Yc4Hd6Jf1Gs0Ae3Ui5Oq in the env": f"KEY={MARKER} in the env",
        "secret whsec_0a1B2c3D4e5F6g7H8i9J0kLmNoPq shown once": f"secret {MARKER} shown once",
        "ProxyError('http://bob:hunter2@proxy.corp:3128')": f"ProxyError('http://bob:{MARKER}@proxy.corp:3128')",
        "--index-url https://__token__:pypi-AgEIcHlwaS5vcmc@pkgs.corp/simple": (
            f"--index-url https://__token__:{MARKER}@pkgs.corp/simple"
        ),
        "git+https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r": (f"git+https://{MARKER}@github.com/o/r"),
    }
    for text, expected in cases.items():
        assert redact_text(text) == expected


def test_ordinary_text_is_not_mangled():
    for text in [
        "api_key: required for a new credential",  # our own validation message
        "pip install scikit-learn; task-1234567890abcdefgh; risk-assessment-framework",
        "use Bearer auth (i.e. Authorization: Bearer YOUR_KEY)",  # OpenAI's own hint
        "sk-proj-****************************************Qb",  # already masked by the provider
        "HTTP 429: Rate limit reached for gpt-4o in organization org-abc on tokens per min",
        "key ci (prb_Zx3kQ9-v…) revoked",  # a key's prefix, as pages and the audit log name it
        "git clone git@github.com:pallets/flask.git; https://pypi.org/simple/ (mail a@b.example)",
        "https://user@example.com:8080/path and http://proxy:3128/",  # no password to hide
    ]:
        assert redact_text(text) == text


def test_the_credentials_key_goes_whole_and_as_any_run_of_8():
    assert redact_text(f"a {AZURE_KEY} b", [AZURE_KEY]) == f"a {MARKER} b"
    cut = AZURE_KEY[5:30]  # a provider quoting part of it, or a message cut in the middle
    assert redact_text(f"key …{cut}… refused", [AZURE_KEY]) == f"key …{MARKER}… refused"
    assert redact_text(f"ends {AZURE_KEY[-8:]}", [AZURE_KEY]) == f"ends {MARKER}"
    assert redact_text(f"only {AZURE_KEY[:7]} here", [AZURE_KEY]) == f"only {AZURE_KEY[:7]} here"  # 7 is not a leak
    assert redact_text("the word password stays", ["pass"]) == "the word password stays"  # too short to look for


def test_raw_json_is_redacted_keys_and_values_and_copied():
    raw = {
        "error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"},
        "headers": {"Authorization": "Bearer short", "api-key": "x", "x-api-key": AZURE_KEY},
        KEY: "a key as a field name",
        AZURE_KEY[:20]: "another",
        "choices": [{"message": {"content": f"quote {AZURE_KEY}"}}, 3, None, 1.5],
        "usage": {"prompt_tokens": 12},
    }
    clean = redact_data(raw, [AZURE_KEY])
    assert clean["error"] == {"message": f"Incorrect API key provided: {MARKER}", "code": "invalid_api_key"}
    assert clean["headers"] == {"Authorization": MARKER, "api-key": MARKER, "x-api-key": MARKER}
    assert clean[MARKER] == "a key as a field name" and clean[MARKER + "'"] == "another"  # neither lost
    assert clean["choices"] == [{"message": {"content": f"quote {MARKER}"}}, 3, None, 1.5]
    assert clean["usage"] == {"prompt_tokens": 12}
    assert raw["error"]["message"].endswith(KEY)  # the input is left alone


def test_an_answer_loses_only_the_credentials_key():
    answer = f"fixture = {LOOKALIKE!r}\nkey = {KEY!r}\nAuthorization: Bearer abcdefghijklmnopqrstu"
    assert redact_answer(answer, [KEY]) == (
        f"fixture = {LOOKALIKE!r}\nkey = '{MARKER}'\nAuthorization: Bearer abcdefghijklmnopqrstu"
    )


@pytest.fixture
def echo():
    server = EchoProvider("openai", KEY)
    yield server
    server.close()


@pytest.fixture
def openai_credential(org, echo):
    credential = ProviderCredential(org=org, provider="openai", base_url=echo.url + "/v1")
    credential.set_api_key(KEY)
    credential.save()
    return credential


def assert_clean(text: str) -> None:
    assert KEY not in text and KEY[8:16] not in text and KEY[-8:] not in text, text


def test_the_gateway_redacts_every_error_it_raises(org, openai_credential, echo):
    """429 echoing the key (retried), then 401 echoing it: message, str(), retry log, request."""
    echo.offset = 1  # this attempt fails
    arm = ArmSpec("openai", "gpt-4o", {"max_retries": 2, "retry_base_ms": 1})
    with pytest.raises(ProviderError) as caught:
        gateway.complete(org.pk, arm, REQUEST)
    error = caught.value
    assert error.category == ErrorCategory.AUTHENTICATION and error.retries == 1
    assert KEY in echo.seen[-1][1]["authorization"]  # the key was sent, so there was one to echo
    assert MARKER in error.message and "Incorrect API key provided" in error.message
    assert MARKER in error.retry_log[0]["message"] and error.retry_log[0]["category"] == "rate_limited"
    for text in (error.message, str(error), repr(error.args), repr(error.retry_log), repr(error.raw_request)):
        assert_clean(text)
    assert error.__context__ is None and error.__cause__ is None  # the SDK's exception quotes the body


def test_the_gateway_redacts_every_completion_it_returns(org, openai_credential, echo):
    """500 echoing the key (retried), then 200 carrying it in the answer, model, id and JSON."""
    arm = ArmSpec("openai", "gpt-4o", {"max_retries": 2, "retry_base_ms": 1})
    completion = gateway.complete(org.pk, arm, REQUEST)
    assert completion.retries == 1 and MARKER in completion.retry_log[0]["message"]
    assert completion.text == f"Fixed it. My key is {MARKER}; the test fixture keeps {LOOKALIKE}.\n"
    assert completion.model_served == f"gpt-4o-{MARKER}" and completion.request_id == f"req_{MARKER}"
    assert completion.raw_response["echo"] == {
        "api_key": MARKER,
        "api-key": MARKER,
        MARKER: "as a field name",
        "note": f"x-api-key: {MARKER}",
    }
    assert LOOKALIKE not in repr(completion.raw_response)  # raw bodies lose lookalikes too
    for text in (completion.text, completion.model_served, completion.request_id, repr(completion)):
        assert_clean(text)


def test_test_connection_reports_without_the_key(org, openai_credential, echo):
    refused = do_test_connection(org, openai_credential, "gpt-4o")
    answered = do_test_connection(org, openai_credential, "gpt-4o")
    assert (refused.ok, refused.category, answered.ok) == (False, "authentication", True)
    assert refused.message.startswith("HTTP 401: Incorrect API key provided: [redacted]")
    assert answered.message.startswith(f"gpt-4o-{MARKER} answered in")
    assert_clean(refused.message + answered.message)


def test_log_records_lose_keys_the_gateway_resolved(org, openai_credential, caplog):
    caplog.set_level(logging.DEBUG)
    gateway.prepare(org.pk, ArmSpec("openai", "gpt-4o", {}))
    assert KEY in known_secrets()
    logger = logging.getLogger("tests.redaction")
    logger.warning("provider said %s", f"bad key {KEY[10:40]}")  # no key shape: only the registry knows it
    try:
        raise RuntimeError(f"Incorrect API key provided: {KEY}")
    except RuntimeError:
        logger.exception("call failed with %r", {"api-key": AZURE_KEY})
    assert "provider said bad key [redacted]" in caplog.text
    assert "RuntimeError: Incorrect API key provided: [redacted]" in caplog.text
    assert_clean(caplog.text)
    assert AZURE_KEY not in caplog.text


def test_the_logging_filter_redacts_records_made_elsewhere():
    """A record that did not come through the record factory (another process's, over a
    socket) is still redacted by the filter on the configured handlers."""
    from django.conf import settings

    assert "redact_secrets" in settings.LOGGING["handlers"]["console"]["filters"]
    remember_secret(AZURE_KEY)
    record = logging.makeLogRecord({"msg": "echo %s and %s", "args": (AZURE_KEY, KEY), "levelno": logging.ERROR})
    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == f"echo {MARKER} and {MARKER}"


def test_flash_messages_are_redacted_before_the_cookie(rf):
    from django.conf import settings

    from prbench.redacting import RedactingFallbackStorage

    assert settings.MESSAGE_STORAGE == "prbench.redacting.RedactingFallbackStorage"
    request = rf.get("/")
    request.session = {}
    request._messages = RedactingFallbackStorage(request)
    messages.error(request, f"openai: authentication: HTTP 401: Incorrect API key provided: {KEY}")
    response = HttpResponse()
    request._messages.update(response)
    reader = HttpRequest()
    reader.COOKIES["messages"] = response.cookies["messages"].value
    stored = list(CookieStorage(reader))
    assert [str(m) for m in stored] == [f"openai: authentication: HTTP 401: Incorrect API key provided: {MARKER}"]


def test_a_credential_input_never_shows_its_key():
    values = CredentialInput("openai", "default", KEY)
    assert KEY not in repr(values) and "api_key" not in repr(values)


def test_the_debug_page_of_a_failed_credential_save_shows_no_key(alice, org, settings, monkeypatch):
    """With DEBUG on, a crash inside the save renders Django's technical 500 page: the POST
    data, the view's and the action's locals must not show the key."""
    settings.DEBUG = True

    def crash(self, *args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(ProviderCredential, "save", crash)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    data = {"provider": "openai", "api_key": KEY, "base_url": "", "api_version": "", "deployments": ""}
    response = client.post(reverse("providers:save_credential", args=[org.code]), data)
    assert response.status_code == 500
    page = response.content.decode()
    assert "the database went away" in page and "do_save_credential" in page  # the technical page
    assert_clean(page)
    assert not ProviderCredential.objects.filter(org=org).exists()
    assert client_for(alice).get(reverse("providers:settings", args=[org.code])).status_code == 200
