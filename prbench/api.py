"""The JSON API: ``/api/``, its OpenAPI document at ``/api/openapi.json``, docs at ``/api/docs``.

Each app contributes a router of thin endpoints (``<app>/api.py``) that call the same
``access_*`` helpers and ``check_*``/``do_*`` actions as its pages. Every error, whatever raised
it, leaves as ``{"error": {"code", "message", "field"}}``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as SchemaValidationError

from orgs.api_auth import Throttled
from prbench.api_support import error_body, validation_error_body

api = NinjaAPI(
    title="PRBench API",
    version="1",
    description=(
        "Benchmarks of provider + model arms on pull requests and questions. Authenticate with "
        "`Authorization: Bearer <organisation API key>`. Lists are paged by `cursor`; every error "
        'is `{"error": {"code", "message", "field"}}`.'
    ),
    urls_namespace="api",
)

STATUS_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    422: "invalid",
    429: "throttled",
}


def _respond(request: HttpRequest, body: dict[str, Any], status: int) -> HttpResponse:
    return api.create_response(request, body, status=status)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _respond(request, error_body("not_found", str(exc) or "not found"), 404)


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return _respond(request, error_body("forbidden", str(exc) or "not allowed"), 403)


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    body, status = validation_error_body(exc)
    return _respond(request, body, status)


@api.exception_handler(SchemaValidationError)
def _schema_invalid(request: HttpRequest, exc: SchemaValidationError) -> HttpResponse:
    first = exc.errors[0] if exc.errors else {}
    # ninja's loc is ("body", "payload", "name") or ("query", "limit"): the field is the last
    # name-like part, without the parameter container.
    names = [str(part) for part in first.get("loc", ()) if not isinstance(part, int)]
    field = names[-1] if len(names) > 1 else None
    message = str(first.get("msg", "invalid request"))
    return _respond(request, error_body("invalid", message, field), 422)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    response = _respond(
        request, error_body("unauthenticated", "send an organisation API key as 'Authorization: Bearer KEY'"), 401
    )
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(Throttled)
def _throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    response = _respond(request, error_body("throttled", str(exc)), 429)
    response["Retry-After"] = str(exc.wait_s)
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _respond(request, error_body(STATUS_CODES.get(exc.status_code, "error"), str(exc)), exc.status_code)


def _register_routers() -> None:
    from datasets.api import router as datasets_router
    from experiments.api import router as experiments_router
    from experiments.api_results import router as results_router
    from leaderboards.api import router as leaderboards_router
    from leaderboards.api_gate import router as gate_router

    api.add_router("/", datasets_router)
    api.add_router("/", experiments_router)
    api.add_router("/", results_router)
    api.add_router("/", leaderboards_router)
    api.add_router("/", gate_router)


_register_routers()
