"""The headline promise of redaction: providers that echo the caller's key (in error text,
headers and successful JSON) leave no trace of it anywhere PRBench keeps or shows text.

Real attempts run through the pipeline with the real worker and the real SDKs over a
socket to fakes on 127.0.0.1; Test connection runs through the view, with and without htmx.
Then the key, whole or as any 8 of its characters in a row, is looked for in a dump of
every table, every customer and admin page, the cookies, the exports and the logs.
"""

from __future__ import annotations

import json
import logging
import secrets
import string

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from evaluation.evaluator import platform_org
from evaluation.models import EvaluatorProfile, Verdict
from experiments.actions import ArmSpec, do_replace_arms
from experiments.models import Attempt, AttemptStatus
from providers.models import ProviderCredential
from tests.conftest import client_for, command_export, work_queue
from tests.providers.echo_provider import LOOKALIKE, EchoProvider

ALPHABET = string.ascii_letters + string.digits


def random_key(prefix: str, length: int) -> str:
    return prefix + "".join(secrets.choice(ALPHABET) for _ in range(length))


# Fresh for every run of the suite, so nothing can pass by knowing them in advance.
OPENAI_KEY = random_key("sk-proj-", 48)
ANTHROPIC_KEY = random_key("sk-ant-api03-", 48)
AZURE_KEY = random_key("", 84)  # an Azure key has no recognisable shape: only its own value gives it away
PLATFORM_KEY = random_key("sk-proj-", 48)  # the evaluator's
KEYS = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY, "azure_openai": AZURE_KEY, "platform": PLATFORM_KEY}
CONFIG = {"max_retries": 2, "retry_base_ms": 1}

LOGGERS = ["", "openai", "anthropic", "httpx", "httpcore", "rq", "django", "providers", "experiments", "evaluation"]


def leaks(text: str) -> list[str]:
    """Every key of which some run of 8 characters appears in the text, with the run."""
    found = []
    for name, key in KEYS.items():
        for i in range(len(key) - 7):
            if key[i : i + 8] in text:
                found.append(f"{name}: {key[i : i + 8]!r} at {text.index(key[i : i + 8])}")
                break
    return found


@pytest.fixture
def echoes():
    servers = {
        "openai": EchoProvider("openai", OPENAI_KEY),
        "anthropic": EchoProvider("anthropic", ANTHROPIC_KEY),
        "azure_openai": EchoProvider("azure", AZURE_KEY),
        "platform": EchoProvider("openai", PLATFORM_KEY),
    }
    yield servers
    for server in servers.values():
        server.close()


def add_credential(org, provider: str, key: str, base_url: str, **fields) -> ProviderCredential:
    credential = ProviderCredential(org=org, provider=provider, base_url=base_url, **fields)
    credential.set_api_key(key)
    credential.save()
    return credential


@pytest.fixture
def echoing_org(org, echoes):
    add_credential(org, "openai", OPENAI_KEY, echoes["openai"].url + "/v1")
    add_credential(org, "anthropic", ANTHROPIC_KEY, echoes["anthropic"].url)
    add_credential(
        org,
        "azure_openai",
        AZURE_KEY,
        echoes["azure_openai"].url,
        api_version="2024-10-21",
        deployments={"gpt-4o": "prod-4o"},
    )
    # The evaluator pays with the platform's own key, on its own echoing server.
    add_credential(platform_org(), "openai", PLATFORM_KEY, echoes["platform"].url + "/v1")
    EvaluatorProfile.objects.create(name="reviewer", provider="openai", model_name="gpt-4o", provider_config=CONFIG)
    return org


def run_echoing_attempts(experiment, start, django_capture_on_commit_callbacks):
    arms = [
        ArmSpec("gpt", "openai", "gpt-4o", CONFIG),
        ArmSpec("claude", "anthropic", "claude-sonnet-4-6", CONFIG),
        ArmSpec("azure", "azure_openai", "gpt-4o", CONFIG),
    ]
    do_replace_arms(experiment, arms)
    run = start(experiment, inference_only=True)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # the attempts; recording them queues the evaluator's jobs
    work_queue()  # the evaluator's
    return run


def connection_pages(client: Client, org, provider: str) -> list[str]:
    """Test connection four times: htmx (refused, then answered), then without htmx, so the
    flash message travels in the cookie and is shown on the settings page."""
    credential = ProviderCredential.objects.get(org=org, provider=provider)
    url = reverse("providers:test_connection", args=[org.code, credential.code])
    texts = []
    for htmx in (True, True, False, False):
        response = client.post(url, {"model": "gpt-4o"}, headers={"HX-Request": "true"} if htmx else {})
        assert response.status_code == (200 if htmx else 302)
        texts.append(response.content.decode())
        if not htmx:
            cookie = response.cookies["messages"].value
            decoded = list(CookieStorage(cookie_request(cookie)))
            assert decoded, "the flash message is in the cookie"
            texts += [cookie, json.dumps([str(message) for message in decoded])]
            page = client.get(reverse("providers:settings", args=[org.code]))
            assert page.status_code == 200
            texts.append(page.content.decode())
    return texts


def cookie_request(cookie: str) -> HttpRequest:
    request = HttpRequest()
    request.COOKIES["messages"] = cookie
    return request


def database_dump() -> str:
    rows = []
    for model in apps.get_models():
        if not model._meta.managed:  # django-rq's dashboard: a model without a table
            continue
        for row in model._default_manager.values():
            rows.append(json.dumps({"model": model._meta.label, **row}, cls=DjangoJSONEncoder, default=str))
    return "\n".join(rows)


def admin_pages(staff: Client, run) -> list[str]:
    urls = []
    for model in admin.site._registry:
        opts = model._meta
        urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    urls += [reverse("admin:experiments_attempt_change", args=[a.pk]) for a in run.attempts.all()]
    urls += [reverse("admin:evaluation_verdict_change", args=[v.pk]) for v in Verdict.objects.all()]
    urls += [reverse("admin:experiments_run_change", args=[run.pk])]
    urls += [
        reverse("admin:providers_providercredential_change", args=[c.pk]) for c in ProviderCredential.objects.all()
    ]
    pages = []
    for url in urls:
        response = staff.get(url)
        assert response.status_code == 200, url
        pages.append(response.content.decode())
    return pages


def customer_pages(client: Client, org, run, experiment) -> list[str]:
    urls = [
        reverse("experiments:list"),
        reverse("experiments:detail", args=[experiment.code]),
        reverse("datasets:list"),
        reverse("datasets:detail", args=[experiment.dataset.code]),
        reverse("experiments:run", args=[run.code]),
        reverse("providers:settings", args=[org.code]),
    ]
    urls += [reverse("experiments:attempt", args=[a.code]) for a in run.attempts.all()]
    urls += [reverse("experiments:run_task", args=[run.code, a.task.code]) for a in run.attempts.all()]
    pages = []
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        pages.append(response.content.decode())
    return pages


def test_echoed_keys_leave_no_trace(
    alice, vera, echoing_org, experiment, echoes, start, django_capture_on_commit_callbacks, caplog
):
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    run = run_echoing_attempts(experiment, start, django_capture_on_commit_callbacks)
    owner = client_for(alice)
    texts = []
    for provider in ("openai", "anthropic", "azure_openai"):
        texts += connection_pages(owner, echoing_org, provider)

    # Every path really ran, and every request really carried a key for the server to echo.
    attempts = list(Attempt.objects.filter(run=run).select_related("arm"))
    outcomes = {(a.arm.provider, a.status) for a in attempts}
    for provider in ("openai", "anthropic", "azure_openai"):
        assert {(provider, AttemptStatus.COMPLETED), (provider, AttemptStatus.FAILED)} <= outcomes
    assert all(a.retries == 1 and a.retry_log for a in attempts)  # a retryable echo each
    completed = [a for a in attempts if a.status == AttemptStatus.COMPLETED]
    assert all("[redacted]" in a.output and LOOKALIKE in a.output for a in completed)  # only the key went
    assert all("[redacted]" in a.error_message for a in attempts if a.status == AttemptStatus.FAILED)
    verdicts = list(Verdict.objects.filter(attempt__run=run))
    assert verdicts and any(v.error for v in verdicts) and any(v.raw_responses for v in verdicts)
    for provider, server in echoes.items():
        assert server.seen, provider
        sent = [
            headers.get("authorization", "") + headers.get("x-api-key", "") + headers.get("api-key", "")
            for _, headers, _ in server.seen
        ]
        assert all(KEYS[provider] in header for header in sent)

    texts.append(database_dump())
    texts += customer_pages(owner, echoing_org, run, experiment)
    texts += customer_pages(client_for(vera), echoing_org, run, experiment)  # a viewer too
    alice.is_staff = alice.is_superuser = True
    alice.save()
    texts += admin_pages(client_for(alice), run)
    texts += [command_export(run, export) for export in ("json", "csv", "swebench-preds", "html")]
    texts.append("\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records))
    texts.append(caplog.text)

    assert caplog.records, "the SDKs logged at DEBUG"
    for number, text in enumerate(texts):
        assert not leaks(text), (number, leaks(text), text[:300])
