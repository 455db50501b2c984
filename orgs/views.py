from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from orgs.access import (
    SESSION_KEY,
    access_api_key,
    access_invitation,
    access_invitation_by_token,
    access_offered_invitation,
    access_org,
    access_webhook,
    check_owner,
    memberships_of,
)
from orgs.actions import (
    InvitationRefused,
    check_accept_invitation,
    check_change_role,
    check_invite,
    check_org_fields,
    check_revoke,
    do_accept_invitation,
    do_create_owned_org,
    do_invite,
    do_revoke,
    do_send_invitation,
    do_set_role,
    invitations_for,
)
from orgs.api_keys import check_create_api_key, do_create_api_key, do_revoke_api_key, parse_expiry
from orgs.audit import events_of
from orgs.models import SUBSCRIBABLE_EVENTS, WEBHOOK_URL_MAX, ApiScope, Membership, Organization, Role, WebhookDelivery
from orgs.webhooks import check_webhook, do_create_webhook, do_delete_webhook, do_send_test, do_set_webhook_active


@login_required
@require_POST
def switch_org(request: HttpRequest, code: str) -> HttpResponse:
    membership = access_org(request, code)
    request.session[SESSION_KEY] = str(membership.org.code)
    return redirect("experiments:list")


def _messages_of(exc: ValidationError) -> str:
    return "; ".join(exc.messages)


def _members_page(request: HttpRequest, membership: Membership, status: int = 200, **extra: Any) -> HttpResponse:
    org = membership.org
    context = {
        "org": org,
        "membership": membership,
        "members": org.memberships.select_related("user").order_by("user__email"),
        "invitations": org.invitations.pending().select_related("invited_by").order_by("email"),
        "roles": Role.choices,
        **extra,
    }
    return render(request, "orgs/members.html", context, status=status)


@login_required
def members(request: HttpRequest, code: str) -> HttpResponse:
    """The members and pending invitations; a POST invites someone."""
    membership = access_org(request, code)
    if request.method != "POST":
        return _members_page(request, membership)
    actor = access_org(request, code, manage=True)
    email, role = request.POST.get("email", ""), request.POST.get("role", "")
    try:
        email = check_invite(actor.org, email, role, actor)
    except ValidationError as exc:
        return _members_page(request, actor, invite_error=_messages_of(exc), invite_email=email)
    invitation, token = do_invite(actor.org, email, role, request.user)
    # Rendered, not redirected: the link exists only now (the database keeps its hash), and a
    # redirect would have to carry it through the messages cookie.
    link = request.build_absolute_uri(reverse("orgs:invitation", args=[token]))
    mailed = do_send_invitation(invitation, link)
    return _members_page(request, actor, invited=invitation, invite_link=link, mailed=mailed)


@login_required
@require_POST
def change_role(request: HttpRequest, code: str) -> HttpResponse:
    """Roles of existing members change directly; newcomers are invited instead."""
    actor = access_org(request, code, manage=True)
    email, role = request.POST.get("email", "").strip(), request.POST.get("role", "")
    try:
        target = check_change_role(actor.org, email, role, actor)
    except ValidationError as exc:
        return _members_page(request, actor, role_error=_messages_of(exc))
    do_set_role(target, role)
    messages.success(request, f"{target.user.email} is now {role} of {actor.org.name}")
    return redirect("orgs:members", code=actor.org.code)


@login_required
@require_POST
def revoke_invitation(request: HttpRequest, code: str, invitation: str) -> HttpResponse:
    found = access_invitation(request, code, invitation)
    try:
        check_revoke(found)
    except InvitationRefused as exc:
        messages.error(request, str(exc))
    else:
        do_revoke(found)
        messages.success(request, f"The invitation to {found.email} is withdrawn: its link no longer works")
    return redirect("orgs:members", code=found.org.code)


def _refused(request: HttpRequest, exc: InvitationRefused) -> HttpResponse:
    return render(request, "orgs/invitation_refused.html", {"refusal": exc}, status=exc.status)


def _joined(request: HttpRequest, membership: Membership) -> HttpResponse:
    request.session[SESSION_KEY] = str(membership.org.code)
    messages.success(request, f"You are now {membership.role} of {membership.org.name}")
    return redirect("experiments:list")


@login_required
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation link: the invitee sees what they are offered and accepts with a POST
    (a GET changes nothing, so mail scanners that follow links cannot accept for them)."""
    try:
        found = access_invitation_by_token(token)
    except Http404:
        return render(request, "orgs/invitation_refused.html", {"refusal": None}, status=404)
    try:
        check_accept_invitation(found, request.user)
        if request.method == "POST":
            return _joined(request, do_accept_invitation(found, request.user))
    except InvitationRefused as exc:
        return _refused(request, exc)
    return render(request, "orgs/invitation.html", {"invitation": found})


@login_required
@require_POST
def accept_offered(request: HttpRequest, code: str) -> HttpResponse:
    """The onboarding page's accept button: the verified address stands in for the token."""
    found = access_offered_invitation(request, code)
    try:
        check_accept_invitation(found, request.user)
        return _joined(request, do_accept_invitation(found, request.user))
    except InvitationRefused as exc:
        return _refused(request, exc)


@login_required
def onboarding(request: HttpRequest) -> HttpResponse:
    """Where a user with no organisation lands: create one, or accept an invitation."""
    from allauth.account.models import EmailAddress

    error, slug, name = None, "", ""
    if request.method == "POST":
        slug, name = request.POST.get("slug", "").strip(), request.POST.get("name", "")
        try:
            check_org_fields(slug, name)
            org = do_create_owned_org(request.user, slug, name)
        except ValidationError as exc:
            error = _messages_of(exc)
        else:
            return _joined(request, org.memberships.get())  # its owner, the only member yet
    context = {
        "invitations": invitations_for(request.user).order_by("org__name"),
        "memberships": memberships_of(request.user),
        "unverified": EmailAddress.objects.filter(user=request.user, verified=False).values_list("email", flat=True),
        "error": error,
        "slug": slug,
        "name": name,
        "slug_max": Organization._meta.get_field("slug").max_length,
        "name_max": Organization._meta.get_field("name").max_length,
    }
    return render(request, "orgs/onboarding.html", context)


# --- API keys and the audit log ---------------------------------------------------------------


def _api_keys_page(request: HttpRequest, membership: Membership, status: int = 200, **extra: Any) -> HttpResponse:
    context = {
        "org": membership.org,
        "membership": membership,
        "keys": membership.org.api_keys.select_related("created_by").order_by("revoked_at", "-created_at"),
        "scopes": ApiScope.choices,
        **extra,
    }
    return render(request, "orgs/api_keys.html", context, status=status)


@login_required
def api_keys(request: HttpRequest, code: str) -> HttpResponse:
    """The organisation's API keys; a POST makes one, shown on this response only."""
    membership = access_org(request, code, manage=True)
    if request.method != "POST":
        return _api_keys_page(request, membership)
    name, scopes = request.POST.get("name", ""), request.POST.getlist("scopes")
    try:
        expires_at = parse_expiry(request.POST.get("expires_at", ""))
        scopes = check_create_api_key(membership.org, name, scopes, expires_at)
    except ValidationError as exc:
        return _api_keys_page(request, membership, 422, key_error=_messages_of(exc), key_name=name)
    created, raw = do_create_api_key(membership.org, name, scopes, expires_at, user=request.user)
    # Rendered, not redirected: the key exists only now (the database keeps its hash).
    return _api_keys_page(request, membership, created=created, raw_key=raw)


@login_required
@require_POST
def revoke_api_key(request: HttpRequest, code: str, key: str) -> HttpResponse:
    found = access_api_key(request, code, key)
    if do_revoke_api_key(found, user=request.user):
        messages.success(request, f"The key {found.name!r} ({found.prefix}…) is revoked: it no longer works")
    return redirect("orgs:api_keys", code=found.org.code)


AUDIT_PAGE_SIZE = 100


@login_required
def audit_log(request: HttpRequest, code: str) -> HttpResponse:
    membership = access_org(request, code)
    check_owner(membership)
    page = Paginator(events_of(membership.org), AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "orgs/audit.html", {"org": membership.org, "membership": membership, "page": page})


# --- webhooks ------------------------------------------------------------------------------

DELIVERY_LOG_SIZE = 25


def _webhooks_page(request: HttpRequest, membership: Membership, status: int = 200, **extra: Any) -> HttpResponse:
    org = membership.org
    context = {
        "org": org,
        "membership": membership,
        "webhooks": org.webhooks.order_by("created_at"),
        "deliveries": WebhookDelivery.objects.filter(webhook__org=org)
        .select_related("webhook")
        .order_by("-created_at")[:DELIVERY_LOG_SIZE],
        "events": [(event, event.label) for event in SUBSCRIBABLE_EVENTS],
        "url_max": WEBHOOK_URL_MAX,
        **extra,
    }
    return render(request, "orgs/webhooks.html", context, status=status)


@login_required
@sensitive_post_parameters()
def webhooks(request: HttpRequest, code: str) -> HttpResponse:
    """The organisation's webhooks and their delivery log, for owners and admins (a webhook's
    address can carry a token of the receiving service); a POST adds one."""
    actor = access_org(request, code, manage=True)
    if request.method != "POST":
        return _webhooks_page(request, actor)
    url, events = request.POST.get("url", ""), request.POST.getlist("events")
    try:
        url, events = check_webhook(actor.org, url, events)
    except ValidationError as exc:
        return _webhooks_page(request, actor, status=400, error=_messages_of(exc), form_url=url, form_events=events)
    webhook, secret = do_create_webhook(actor.org, url, events, request.user)
    # Rendered, not redirected: the secret exists in clear only now (the database keeps it
    # encrypted, and no page shows it again).
    return _webhooks_page(request, actor, created=webhook, secret=secret)


@login_required
@require_POST
def webhook_active(request: HttpRequest, code: str, webhook: str) -> HttpResponse:
    found = access_webhook(request, code, webhook)
    active = request.POST.get("active") == "1"
    do_set_webhook_active(found, active, user=request.user)
    messages.success(request, f"The webhook to {found.url} is {'enabled' if active else 'disabled'}")
    return redirect("orgs:webhooks", code=found.org.code)


@login_required
@require_POST
def webhook_delete(request: HttpRequest, code: str, webhook: str) -> HttpResponse:
    found = access_webhook(request, code, webhook)
    do_delete_webhook(found, user=request.user)
    messages.success(request, f"The webhook to {found.url} is deleted, with its delivery log")
    return redirect("orgs:webhooks", code=found.org.code)


@login_required
@require_POST
def webhook_test(request: HttpRequest, code: str, webhook: str) -> HttpResponse:
    found = access_webhook(request, code, webhook)
    do_send_test(found, user=request.user)
    messages.success(request, f"A test event is on its way to {found.url}: see the delivery log below")
    return redirect("orgs:webhooks", code=found.org.code)
