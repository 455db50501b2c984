"""A webhook's address: the one check, when it is saved (orgs/webhooks.py) and again before
each delivery is sent (orgs/webhook_delivery.py), so both import it and neither imports the
other for it."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from orgs.models import WEBHOOK_URL_MAX
from prbench import egress
from prbench.inputs import check_text


def check_webhook_url(url: str) -> str:
    """``url`` stripped, once it is an http(s) address the egress policy lets PRBench reach."""
    url = check_text(url, "url", WEBHOOK_URL_MAX).strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValidationError("url: not a valid URL") from None
    if parts.scheme not in ("https", "http"):
        raise ValidationError("url must start with https://")
    problem = egress.url_problem(url)
    if problem:
        raise ValidationError(f"url {problem}")
    try:
        addresses = egress.destination(url)
    except egress.EgressRefused as exc:
        raise ValidationError(f"url: {exc}") from None
    except egress.NoAnswer as exc:
        raise ValidationError(f"url: {exc}") from None
    if parts.scheme == "http" and not all(egress.in_allowed_network(address) for address in addresses):
        raise ValidationError(
            f"url must start with https://; plain http is accepted only inside networks allowed in {egress.SETTING}"
        )
    return url
