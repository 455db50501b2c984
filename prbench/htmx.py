"""The request type of a view that reads django-htmx's ``request.htmx``, for the type checker."""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails
