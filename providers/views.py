from __future__ import annotations

import json
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from orgs.access import access_org
from orgs.models import Organization
from providers.actions import (
    access_credential,
    access_provider,
    check_allowlist_entry,
    check_credential,
    do_allow,
    do_delete_credential,
    do_disallow,
    do_save_credential,
    do_test_connection,
)
from providers.models import AllowedProvider, ProviderCredential
from providers.registry import provider_choices, test_models


@login_required
def settings_page(request: HttpRequest, code: str) -> HttpResponse:
    membership = access_org(request, code)
    org = membership.org
    credentials = ProviderCredential.objects.filter(org=org)
    editing = _editing(org, request.GET.get("edit", "")) if membership.can_manage else None
    context = {
        "org": org,
        "membership": membership,
        "credentials": credentials,
        "editing": editing,
        "editing_deployments": json.dumps(editing.deployments) if editing else "",
        "allowlist": AllowedProvider.objects.filter(org=org),
        "providers": provider_choices(),
        "test_models": test_models(),
        "errors": [],
    }
    return render(request, "providers/settings.html", context)


def _editing(org: Organization, raw: str) -> ProviderCredential | None:
    """The credential ``?edit=`` names; nothing (not an error page) for a malformed code."""
    try:
        code = uuid.UUID(raw)
    except ValueError:
        return None
    return ProviderCredential.objects.filter(org=org, code=code).first()


@sensitive_post_parameters()  # every field: a debug page or error report must not show a key
@login_required
@require_POST
def save_credential(request: HttpRequest, code: str) -> HttpResponse:
    org = access_org(request, code, manage=True).org
    editing = access_credential(org, request.POST["credential"]) if request.POST.get("credential") else None
    try:
        values = check_credential(org, request.POST.dict(), editing)
        do_save_credential(org, values, editing, user=request.user)
    except ValidationError as exc:
        messages.error(request, "Credential not saved: " + "; ".join(exc.messages))
    else:
        messages.success(request, f"Saved the {values.provider} credential {values.name!r}.")
    return redirect("providers:settings", code=org.code)


@login_required
@require_POST
def delete_credential(request: HttpRequest, code: str, credential: uuid.UUID) -> HttpResponse:
    org = access_org(request, code, manage=True).org
    found = access_credential(org, credential)
    do_delete_credential(found, user=request.user)
    messages.success(request, f"Deleted the {found.provider} credential {found.name!r}.")
    return redirect("providers:settings", code=org.code)


@sensitive_post_parameters()  # every field: a debug page or error report must not show a key
@login_required
@require_POST
def test_connection(request: HttpRequest, code: str, credential: uuid.UUID) -> HttpResponse:
    org = access_org(request, code, manage=True).org
    found = access_credential(org, credential)
    report = do_test_connection(org, found, request.POST.get("model", ""))
    context = {"credential": found, "report": report}
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "providers/settings.html#connection", context)
    level = messages.success if report.ok else messages.error
    level(request, f"{found.provider} {found.name!r}: {report.category}: {report.message}")
    return redirect("providers:settings", code=org.code)


@login_required
@require_POST
def allow(request: HttpRequest, code: str) -> HttpResponse:
    org = access_org(request, code, manage=True).org
    try:
        provider, patterns = check_allowlist_entry(request.POST.dict())
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        do_allow(org, provider, patterns, user=request.user)
        messages.success(request, f"{provider} is on the allowlist.")
    return redirect("providers:settings", code=org.code)


@login_required
@require_POST
def disallow(request: HttpRequest, code: str, provider: str) -> HttpResponse:
    org = access_org(request, code, manage=True).org
    do_disallow(org, access_provider(provider), user=request.user)
    return redirect("providers:settings", code=org.code)
