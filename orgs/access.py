"""The only way customer-facing code reaches organisation data.

Every ``access_*`` helper takes the request and a public id and returns the object only
when the user belongs to its organisation: anything else is a 404, so an outsider cannot
even learn that the object exists. ``write=True`` additionally requires a role that may
change things (viewers get 403), ``manage=True`` an admin or owner.

A request made with an API key (the JSON API, prbench/api.py) goes through the same helpers: the
key stands in for a membership of its own organisation, with the role its scopes allow
(``ApiKey.role``), and every other organisation's objects are a 404 to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from allauth.core.exceptions import ImmediateHttpResponse
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest
from django.shortcuts import redirect
from structlog.contextvars import bind_contextvars

from orgs.models import ApiKey, Invitation, Membership, Organization, Role, Webhook

if TYPE_CHECKING:
    pass

SESSION_KEY = "current_org"
M = TypeVar("M", bound=Model)


def memberships_of(user: Any) -> QuerySet[Membership]:
    if not user.is_authenticated:
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("org")


def key_membership(request: HttpRequest) -> Membership | None:
    """The membership an API key request acts as (unsaved: it is the key's, not a person's)."""
    api_key = getattr(request, "api_key", None)
    if api_key is None:
        return None
    return Membership(org=api_key.org, role=api_key.role)


def membership_for(request: HttpRequest, org: Organization) -> Membership:
    """The user's membership of ``org`` (404 for outsiders), remembered for the request so a
    view can ask for the role after an ``access_*`` call without another query."""
    as_key = key_membership(request)
    if as_key is not None:
        if as_key.org.pk != org.pk:
            raise Http404("No such organisation")
        return as_key
    membership = next((m for m in memberships_of_request(request) if m.org_id == org.pk), None)
    if membership is None:
        raise Http404("No such organisation")
    bind_contextvars(org=org.slug)  # the request's log lines say whose data it reached
    return membership


def memberships_of_request(request: HttpRequest) -> list[Membership]:
    """The signed-in user's memberships, read once per request: the access check, the current
    organisation and the page's organisation menu all ask for them. Every view that changes a
    membership redirects, so the next request reads them anew; a request that signs someone in
    reads theirs (the list is kept with the user it belongs to)."""
    user = request.user
    cached = request.__dict__.get("_prbench_memberships")
    if cached is None or cached[0] != user.pk:
        cached = request.__dict__["_prbench_memberships"] = (user.pk, list(memberships_of(user)))
    return cached[1]


def check_role(membership: Membership, *, write: bool = False, manage: bool = False) -> None:
    if manage and not membership.can_manage:
        raise PermissionDenied("Only admins and owners can manage this organisation")
    if write and not membership.can_write:
        raise PermissionDenied("Viewers have read-only access")


def current_membership(request: HttpRequest) -> Membership | None:
    """The membership the user last switched to, or their first one."""
    as_key = key_membership(request)
    if as_key is not None:
        return as_key
    memberships = memberships_of_request(request)
    code = request.session.get(SESSION_KEY)
    chosen = next((m for m in memberships if str(m.org.code) == code), None) if code else None
    return chosen or next(iter(memberships), None)


class NeedsOnboarding(ImmediateHttpResponse):
    """A signed-in user in no organisation is sent to the onboarding page, not shown a 404.

    It travels as allauth's ImmediateHttpResponse, which allauth's AccountMiddleware (already
    installed) turns into the response it carries.
    """

    def __init__(self) -> None:
        super().__init__(redirect("orgs:onboarding"))


def access_current_org(request: HttpRequest, *, write: bool = False, manage: bool = False) -> Membership:
    membership = current_membership(request)
    if membership is None:
        if request.user.is_authenticated and not getattr(request, "is_api", False):
            raise NeedsOnboarding()
        raise Http404("You do not belong to any organisation yet")
    check_role(membership, write=write, manage=manage)
    bind_contextvars(org=membership.org.slug)
    return membership


def access_org(request: HttpRequest, code: Any, *, manage: bool = False) -> Membership:
    org = get_or_404(Organization.objects.all(), code=code)
    try:
        membership = membership_for(request, org)
    except Http404:
        raise _not_found(Organization) from None  # an outsider learns no more than from a made-up code
    check_role(membership, manage=manage)
    return membership


def check_owner(membership: Membership) -> None:
    """The audit log is the owners' record of what admins and keys did."""
    if membership.role != Role.OWNER:
        raise PermissionDenied("Only owners can read the audit log")


def access_api_key(request: HttpRequest, org_code: Any, code: Any) -> ApiKey:
    """An API key of an organisation the user manages (404 for outsiders, 403 for others)."""
    org = access_org(request, org_code, manage=True).org
    return get_or_404(org.api_keys.select_related("org"), code=code)


def access_invitation(request: HttpRequest, org_code: Any, code: Any) -> Invitation:
    """An invitation of an organisation the user manages (404 for outsiders, 403 for others)."""
    org = access_org(request, org_code, manage=True).org
    return get_or_404(org.invitations.select_related("org"), code=code)


def access_webhook(request: HttpRequest, org_code: Any, code: Any) -> Webhook:
    """A webhook of an organisation the user manages (404 for outsiders, 403 for others)."""
    org = access_org(request, org_code, manage=True).org
    return get_or_404(org.webhooks.select_related("org"), code=code)


def access_invitation_by_token(token: str) -> Invitation:
    """The invitation a link's token names: holding the link is what this checks; who may
    accept it is ``check_accept_invitation``'s question."""
    return get_or_404(Invitation.objects.select_related("org", "invited_by"), token_hash=Invitation.hash_token(token))


def access_offered_invitation(request: HttpRequest, code: Any) -> Invitation:
    """An invitation addressed to one of the user's verified addresses (the onboarding page's
    accept buttons, which have no token); anything else is a 404."""
    from orgs.actions import invitations_for

    return get_or_404(invitations_for(request.user), code=code)


def _not_found(model: type[Model]) -> Http404:
    return Http404(f"No such {model._meta.verbose_name}")


def get_or_404(queryset: QuerySet[M], **lookup: Any) -> M:
    try:
        return queryset.get(**lookup)
    except (ObjectDoesNotExist, ValidationError, ValueError):
        # A malformed public id in the URL is just "not found", never a 500.
        raise _not_found(queryset.model) from None


def check_scoped(request: HttpRequest, found: Model, org: Organization, write: bool, manage: bool = False) -> None:
    """The role check for ``found``, an object of ``org``. An outsider gets the very 404 an
    unknown id gets (not membership_for's "No such organisation"): the answer must not tell
    another organisation's id from a made-up one."""
    try:
        membership = membership_for(request, org)
    except Http404:
        raise _not_found(type(found)) from None
    check_role(membership, write=write, manage=manage)
