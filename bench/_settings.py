"""What every bench script runs with: production settings on the `make demo` stores."""

from __future__ import annotations

import os
import secrets
import tempfile


def production_environment() -> dict[str, str]:
    """DEBUG off, as any deployment runs (with DEBUG on, Django logs every query, which
    costs a latency-bound run about 5% of its wall time), with throwaway keys, SQLite under
    a fresh directory and the embedded Redis unless DATABASE_URL / REDIS_URL are set."""
    from cryptography.fernet import Fernet

    return {
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(32),
        "PRBENCH_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "PRBENCH_VAR_DIR": tempfile.mkdtemp(prefix="prbench-bench-"),
        "LOG_LEVEL": "ERROR",
        # The benches' fake providers listen on loopback, which the egress policy refuses
        # unless allowed, as `make demo` allows it.
        "PRBENCH_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128",
    }


def use_production_environment() -> None:
    for name, value in production_environment().items():
        os.environ.setdefault(name, value)
