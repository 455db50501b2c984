"""The web side of keeping keys secret: flash messages, and Django's error pages.

Flash messages travel in a cookie (or the session) and are shown on the next page, so a
provider's error text quoted in one loses any key first. Django's error reports hide
``sensitive_post_parameters`` and ``sensitive_variables`` only when ``DEBUG`` is off; the
filter below hides them on the DEBUG page too, where a key typed into a form would
otherwise be shown in full to whoever sees the page.
"""

from __future__ import annotations

from typing import Any

from django.contrib.messages.storage.fallback import FallbackStorage
from django.http import HttpRequest
from django.views.debug import SafeExceptionReporterFilter

from prbench.redaction import redact_known


class RedactingFallbackStorage(FallbackStorage):
    """Django's default storage (cookie, then session), redacting each message as it is added."""

    def add(self, level: int, message: Any, extra_tags: str | None = "") -> None:
        super().add(level, redact_known(str(message)) if message else message, extra_tags)


class AlwaysSafeExceptionReporterFilter(SafeExceptionReporterFilter):
    """Cleanses sensitive POST parameters and variables whatever ``DEBUG`` says."""

    def is_active(self, request: HttpRequest | None) -> bool:
        return True
