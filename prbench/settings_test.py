"""Test settings: real Postgres and a Redis database set aside for tests."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/prbench")
# Each pytest-xdist worker gets its own Redis database (10, 11, ...): tests flush it.
# TEST_REDIS_DB_BASE (and a DATABASE_URL of its own) lets a second suite run beside the first.
_xdist_worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
_redis_db_base = int(os.environ.get("TEST_REDIS_DB_BASE", "10"))
# Always set, never defaulted: the xdist controller imports these settings too, and its
# REDIS_URL would otherwise be inherited by every worker, which would then share a database.
_redis_server = os.environ.get("TEST_REDIS_SERVER", "redis://127.0.0.1:6379")
os.environ["REDIS_URL"] = f"{_redis_server}/{_redis_db_base + _xdist_worker}"
os.environ.setdefault("DEBUG", "True")

from prbench.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
PRBENCH_VALIDATION_TIMEOUT_SECONDS = 20
# The fake providers listen on loopback; nothing else may be reached, whatever the environment says.
PRBENCH_ALLOWED_PRIVATE_NETWORKS = networks("PRBENCH_ALLOWED_PRIVATE_NETWORKS", "127.0.0.0/8,::1/128")  # noqa: F405
# A fixed test key (not a secret): credentials in the test database are encrypted with it.
PRBENCH_ENCRYPTION_KEYS = "akQXInqjqleliVcdPKfFGClb6jb4hvvgif22nzrya5k="
