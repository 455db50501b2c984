"""allauth's account adapter, with the failed-login counter keyed by the account alone.

allauth keys an account's failed logins by ``get_current_site(request).domain`` and the login.
Without the sites framework that domain is the request's Host header, port included, and any
port of an allowed host passes ALLOWED_HOSTS: an attacker who sent each guess with another
Host (``127.0.0.1:1000``, ``127.0.0.1:1001``, ...) started a fresh counter every time, and the
10-per-15-minutes lockout never came. The key here depends on nothing the client chooses.
"""

from __future__ import annotations

from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from django.http import HttpRequest


class AccountAdapter(DefaultAccountAdapter):
    # allauth calls this private hook both to count a failure (pre_authenticate) and to wipe
    # the count after a password reset, so the two stay on the same key. The key is the login
    # lower-cased, as allauth looks users up by the lower-cased address
    # (allauth.account.internal.userkit.filter_users_by_email): every spelling that reaches one
    # account shares one counter.
    def _get_login_attempts_cache_key(self, request: HttpRequest, **credentials: Any) -> str:
        return str(credentials.get("email", credentials.get("username", ""))).lower()
