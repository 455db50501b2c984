"""Work to do once the transaction commits, that must not raise into the code that committed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.db import transaction


def after_commit(func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``func(*args, **kwargs)`` once the transaction commits, robustly: an error is logged,
    not raised after the commit (where it would abort whatever the caller does next).

    Not a bare ``functools.partial``: Django names a failed robust callback by its
    ``__qualname__``, which a partial lacks, so the log line itself raised AttributeError and
    the failure escaped after all (Django 5.2)."""
    call = functools.update_wrapper(functools.partial(func, *args, **kwargs), func)
    transaction.on_commit(call, robust=True)
