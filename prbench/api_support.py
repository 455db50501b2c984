"""What every JSON API endpoint shares: strict request bodies, errors and pagination.

Who may call is orgs/api_auth.py's: ``Authorization: Bearer <API key>`` (scripts, CI,
notebooks) or the browser's session (so /api/docs works for a signed-in person, with Django's
CSRF check on writes). Either way the endpoint then reaches data through the ``access_*``
helpers, which treat a key as a member of its own organisation: the rules are the browser's,
written once.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar

from django.core import signing
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from ninja import Schema
from pydantic import BaseModel, ConfigDict, Strict, model_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from prbench.inputs import load_spec

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
