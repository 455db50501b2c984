"""Encryption at rest for stored secrets: provider API keys and webhook signing secrets.

On the ground floor (no model of any app) because two floors keep secrets with it: ``orgs``
(webhooks) and ``providers`` (credentials).

``PRBENCH_ENCRYPTION_KEYS`` holds one or more Fernet keys, comma-separated, newest first:
new values are encrypted with the first, and any of them decrypts, so keys can be rotated
(add a new key in front, run ``manage.py rotate_credentials``, then drop the old one).
With DEBUG on and no keys configured, a key is derived from SECRET_KEY so the demo needs
no configuration.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class DecryptionFailed(Exception):
    """The stored value was not encrypted with any configured key."""


@cache
def _fernet() -> MultiFernet:
    keys = [k.strip() for k in settings.PRBENCH_ENCRYPTION_KEYS.split(",") if k.strip()]
    if not keys:
        if not settings.DEBUG:
            raise ImproperlyConfigured("PRBENCH_ENCRYPTION_KEYS must be set when DEBUG is False")
        keys = [base64.urlsafe_b64encode(hashlib.sha256(settings.SECRET_KEY.encode()).digest()).decode()]
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError:
        raise ImproperlyConfigured("PRBENCH_ENCRYPTION_KEYS holds a value that is not a Fernet key") from None


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionFailed("the stored secret cannot be decrypted with the configured keys") from None


def rotate(token: str) -> str:
    """Re-encrypt with the newest key."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionFailed("the stored secret cannot be decrypted with the configured keys") from None


def reset_cache() -> None:
    _fernet.cache_clear()
