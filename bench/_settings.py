"""What every bench script runs with: production settings on the `make demo` stores."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from pathlib import Path


def production_environment() -> dict[str, str]:
    """DEBUG off, as any deployment runs (with DEBUG on, Django logs every query, which
    costs a latency-bound run about 5% of its wall time), with throwaway keys, SQLite under
    a fresh directory and the embedded Redis unless DATABASE_URL / REDIS_URL are set.

    The var dir is the one this process was given (a bench's child process inherits its
    parent's), else a fresh one removed when this process exits."""
    from cryptography.fernet import Fernet

    return {
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(32),
        "PRBENCH_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
        "PRBENCH_VAR_DIR": os.environ.get("PRBENCH_VAR_DIR") or temporary_directory("prbench-bench-"),
        "LOG_LEVEL": "ERROR",
        # The benches' fake providers listen on loopback, which the egress policy refuses
        # unless allowed, as `make demo` allows it.
        "PRBENCH_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128",
    }


def use_production_environment() -> None:
    for name, value in production_environment().items():
        os.environ.setdefault(name, value)


def temporary_directory(prefix: str) -> str:
    """A fresh directory under /tmp, removed when this process exits (normally, on an
    exception or on Ctrl-C; SIGTERM too, as an exit). Every process that writes into it
    (RQ workers, the embedded Redis, a case's child process) is one this process started
    and stops before it exits: exit handlers run after the scripts' own ``finally`` blocks."""
    directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(remove_tree, Path(directory))
    _exit_on_sigterm()
    return directory


def remove_tree(directory: Path) -> None:
    """Remove a directory whatever it holds: building a task environment leaves its
    directories read-only, which stops ``rmtree`` at the first file inside."""
    if not directory.exists():
        return
    for root, dirs, _ in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(directory, ignore_errors=True)


def _exit_on_sigterm() -> None:
    """SIGTERM ends the script as an exception would, so ``finally`` blocks and exit
    handlers run (Python's default stops it cold). A script that set its own handler keeps it."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_exit)


def _raise_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
