"""Refuse undecodable request text before any view (or query) sees it."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from django.core.handlers.wsgi import get_bytes_from_wsgi
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.cache import patch_vary_headers

from prbench.api_support import error_body
from prbench.inputs import argument_problem

URLENCODED = "application/x-www-form-urlencoded"
API_PREFIX = "/api/"


def encoded_field_problem(encoded: bytes, where: str) -> str | None:
    """The first field of a urlencoded string that is not valid UTF-8 or holds a NUL.

    Django decodes invalid UTF-8 with replacement characters, so the raw bytes are the
    only place the difference is visible."""
    for pair in encoded.split(b"&"):
        parts = [unquote_to_bytes(part.replace(b"+", b" ")) for part in pair.split(b"=", 1)]
        name = parts[0].decode("utf-8", "replace")[:40]
        for raw in parts:
            try:
                problem = argument_problem(raw.decode("utf-8"))
            except UnicodeDecodeError:
                problem = "is not valid UTF-8 text"
            if problem:
                return f"{where} {name!r} {problem}"
    return None


class InputHygieneMiddleware:
    """400 for a query parameter or urlencoded form field with a NUL, a lone surrogate or
    invalid UTF-8. Multipart bodies are left to the forms (Django refuses NUL there), so no
    upload is read into memory here."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = encoded_field_problem(get_bytes_from_wsgi(request.META, "QUERY_STRING", ""), "query parameter")
        if problem is None and request.content_type == URLENCODED and request.method not in ("GET", "HEAD"):
            # Django reads a urlencoded body into memory anyway, within DATA_UPLOAD_MAX_MEMORY_SIZE.
            problem = encoded_field_problem(request.body, "form field")
        if problem and request.path.startswith(API_PREFIX):
            # The API answers every error with its JSON error body, this one too.
            return JsonResponse(error_body("bad_request", f"Bad request: {problem}."), status=400)
        if problem:
            return HttpResponseBadRequest(f"Bad request: {problem}.\n", content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class HtmxVaryMiddleware:
    """Every response varies by the HX-Request header. A page that htmx polls or refreshes is
    served whole to the browser and as a fragment to htmx, at the same address: without the
    header, the browser's cache kept the last fragment under that address, and going back to
    the page showed the fragment alone (a finished run's boards without its attempts list)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        patch_vary_headers(response, ("HX-Request",))
        return response
