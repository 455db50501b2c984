"""Middleware that writes organisation data: the audit trail of what each API key did."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from orgs import api_keys, audit


class ApiKeyAuditMiddleware:
    """Every request made with an API key lands in its organisation's audit log, with the
    status it got: owners can see what each key did, including what it was refused."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        api_key = getattr(request, "api_key", None)
        if api_key is not None:
            detail = {"method": request.method, "path": request.path[:300], "status": response.status_code}
            audit.record(api_key.org, audit.USE_ACTION, key=api_key, target=api_keys.describe(api_key), detail=detail)
        return response
