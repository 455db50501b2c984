"""Who is calling the JSON API: an organisation's API key (with its scopes and throttle) or the
signed-in browser session (CSRF-checked on writes), and what each may do. The access layer
(orgs/access.py) then treats a key as a member of its own organisation."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from orgs import api_keys
from orgs.models import ApiScope, Role

# What a signed-in person's role allows, in the API's scopes.
ROLE_SCOPES = {
    Role.OWNER: set(ApiScope.values),
    Role.ADMIN: set(ApiScope.values),
    Role.MEMBER: {ApiScope.READ, ApiScope.RUN},
    Role.VIEWER: {ApiScope.READ},
}


class Throttled(Exception):
    def __init__(self, wait_s: int):
        super().__init__(f"too many requests for this key: retry in {wait_s} s")
        self.wait_s = wait_s


class KeyAuth(HttpBearer):
    """An organisation API key, which must carry ``scope``."""

    def __init__(self, scope: str):
        super().__init__()
        self.scope = str(ApiScope(scope).value)

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        api_key = api_keys.authenticate(token)
        if api_key is None:
            return None
        request.api_key = api_key  # type: ignore[attr-defined]
        request.is_api = True  # type: ignore[attr-defined]
        wait = api_keys.throttle_wait(api_key)
        if wait:
            raise Throttled(wait)
        if self.scope not in api_key.scopes:
            raise PermissionDenied(f"this key lacks the {self.scope!r} scope")
        return api_key


class BrowserSessionAuth(APIKeyCookie):
    """The signed-in browser session (CSRF-checked on writes by ninja); the access layer then
    checks the person's role as the pages do."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self, scope: str):
        super().__init__()
        self.scope = str(ApiScope(scope).value)

    def __call__(self, request: HttpRequest) -> Any:
        # Only a signed-in browser that names no key is this scheme's to judge, and only then is
        # its CSRF token checked: a script with no key, or a bad one, gets the 401 that tells it
        # to send a key, not the CSRF check's 403. A request that names a key is judged by that
        # key alone: a revoked key sent from a signed-in browser must not fall back to the session.
        if "authorization" in request.headers or not request.user.is_authenticated:
            return None
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        request.is_api = True  # type: ignore[attr-defined]
        return request.user


def check_session_csrf(request: HttpRequest) -> None:
    """The CSRF check of a browser session's write, for an endpoint marked ``csrf_exempt`` so
    that it can prepare the request before the check reads the body (an upload sets its size
    limit: Django refuses new upload handlers once the body has been parsed). A key's request
    carries no cookie to forge and needs none."""
    if getattr(request, "api_key", None) is None and check_csrf(request) is not None:
        raise PermissionDenied("CSRF check Failed")


def api_auth(scope: str) -> list[Any]:
    return [KeyAuth(scope), BrowserSessionAuth(scope)]


READ = api_auth(ApiScope.READ)
RUN = api_auth(ApiScope.RUN)
ADMIN = api_auth(ApiScope.ADMIN)


def actor(request: HttpRequest) -> Any:
    """Who to record as having done a write: the signed-in person, or the person who made the
    key (None if they have since left)."""
    api_key = getattr(request, "api_key", None)
    if api_key is not None:
        return api_key.created_by
    return request.user
