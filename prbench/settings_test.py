"""Test settings: real Postgres and a Redis database set aside for tests."""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/prbench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("DEBUG", "True")

from prbench.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
PRBENCH_VALIDATION_TIMEOUT_SECONDS = 20
