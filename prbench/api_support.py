"""What every JSON API endpoint shares: authentication, scopes, errors and pagination.

Two ways in: ``Authorization: Bearer <API key>`` (scripts, CI, notebooks) and the browser's
session (so /api/docs works for a signed-in person, with Django's CSRF check on writes). Either
way the endpoint then reaches data through the ``access_*`` helpers, which treat a key as a
member of its own organisation (orgs/access.py): the rules are the browser's, written once.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar

from django.conf import settings
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from ninja import Schema
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf
from pydantic import BaseModel, ConfigDict, Strict, model_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from orgs import api_keys
from orgs.models import ApiScope, Role
from prbench.inputs import load_spec

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


def current_org_or_404(request: HttpRequest) -> Any:
    from orgs.access import access_current_org

    return access_current_org(request).org


# --- request bodies ----------------------------------------------------------------------------


class JsonBody(BaseModel):
    """A JSON request body, read as it is written.

    ninja's ``Schema`` reads any value by attribute, so a body of ``[]``, ``"str"`` or ``null``
    read as "every default" (and started a full run); pydantic's lax mode reads ``"yes"``,
    ``"1"`` and ``1`` as true and ``true`` as the integer 1; and a misspelt field was dropped,
    its default silently taken. Each turns a wrong request into a different one, so a body
    must be an object, its fields strictly typed (``JsonDecimal`` for money, which is sent as
    a string or a number alike), and nothing in it unknown.
    """

    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, data: Any) -> Any:
        if not isinstance(data, dict | BaseModel):
            raise PydanticCustomError("body_not_object", "the body must be a JSON object")
        return data


JsonDecimal = Annotated[Decimal, Strict(False)]
B = TypeVar("B", bound=JsonBody)


def read_body(request: HttpRequest, schema: type[B], *, empty_means_defaults: bool = False) -> B:
    """The request's JSON body as ``schema``: read by the endpoint after its access check, so an
    outsider gets the same 404 whatever it sends, and through the spec files' reader (a parse
    error names its line). A problem is a 422 naming its field."""
    if empty_means_defaults and not request.body:
        return schema()
    data = load_spec(request.body, "request body.json")
    try:
        return schema.model_validate(data)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        names = [str(part) for part in first["loc"] if not isinstance(part, int)]
        raise ValidationError({names[-1] if names else "__all__": first["msg"]}) from None


def json_body(schema: type[JsonBody], *, required: bool = True) -> dict[str, Any]:
    """The OpenAPI ``requestBody`` of an endpoint that reads ``schema`` with ``read_body``."""
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": schema.model_json_schema()}},
        }
    }


# --- errors ------------------------------------------------------------------------------------


class ErrorDetail(Schema):
    code: str
    message: str
    field: str | None = None


class ErrorBody(Schema):
    error: ErrorDetail


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


# ValidationError codes that say more than "invalid" and keep their name in the error body; a
# state that does not allow the request is a 409, like any other conflict.
NAMED_CODES = {"not_found": 422, "not_finished": 409, "no_shared_tasks": 422, "conflict": 409}


def validation_error_body(exc: ValidationError) -> tuple[dict[str, Any], int]:
    """The first problem of a Django ValidationError, with its field when it names one, and the
    status it answers with."""
    if hasattr(exc, "error_dict"):
        field, errors = next(iter(exc.error_dict.items()))
        message = "; ".join(message for error in errors for message in error.messages)
        code = next((error.code for error in errors if error.code in NAMED_CODES), "invalid")
        return error_body(code, message, None if field == "__all__" else field), NAMED_CODES.get(code, 422)
    named = [error.code for error in exc.error_list if error.code in NAMED_CODES]
    code = named[0] if named else "invalid"
    return error_body(code, "; ".join(exc.messages)), NAMED_CODES.get(code, 422)


def form_invalid(form: Any, default_field: str | None = None) -> ValidationError:
    """A bound, invalid Django form's errors as the ValidationError the API answers 422 with,
    so an endpoint that shares a page's form shares its rules too. A form-wide error is put
    on ``default_field`` when the endpoint knows which input it is about."""
    errors = dict(form.errors.as_data())
    if default_field and "__all__" in errors:
        errors.setdefault(default_field, [])
        errors[default_field] = [*errors.pop("__all__"), *errors[default_field]]
    return ValidationError(errors)


# The error responses every endpoint can give, for the OpenAPI document (400: a query
# parameter that is not text, refused before any endpoint by prbench/middleware.py).
COMMON_ERRORS: dict[int, Any] = {status: ErrorBody for status in (400, 401, 403, 404, 422, 429)}
WITH_CONFLICT: dict[int, Any] = {**COMMON_ERRORS, 409: ErrorBody}


# --- cursor pagination -----------------------------------------------------------------------------

T = TypeVar("T")
M = TypeVar("M", bound=Model)
CURSOR_SALT = "prbench.api.cursor"
MAX_LIMIT = 500


class Page(Schema, Generic[T]):
    items: list[T]
    next_cursor: str | None = None


def paginate(queryset: QuerySet[M], cursor: str | None, limit: int) -> tuple[list[M], str | None]:
    """One page of ``queryset``, newest first, and the cursor of the next page (None: the last).

    Keyset pagination on the primary key: a page costs the same however deep it is, and rows
    added while a client pages through appear on no page twice. The cursor is signed, so a
    client can neither forge a position nor read an internal id from it.
    """
    queryset = queryset.order_by("-pk")
    if cursor:
        try:
            before = int(signing.loads(cursor, salt=CURSOR_SALT)["before"])
        except (signing.BadSignature, KeyError, TypeError, ValueError):
            raise ValidationError({"cursor": "this cursor is not one the API gave out"}) from None
        queryset = queryset.filter(pk__lt=before)
    rows = list(queryset[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, signing.dumps({"before": rows[-1].pk}, salt=CURSOR_SALT)
