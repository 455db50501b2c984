"""Health checks for load balancers and supervisors.

``/healthz``: the process is up and answering (no database, no Redis: a liveness probe must not
fail, and get the process restarted, because Postgres is down). ``/readyz``: it can do its
work: Postgres answers, Redis answers, and at least one worker holds a live lease (a process
that claims attempts, experiments/liveness.py). 200 when ready, 503 naming what is not.

Neither needs a login, and neither says more than which part failed and the error's class: no
address, no connection string, no message that could carry a credential.

In ``experiments`` because readiness is counted in its worker leases; the URLs stay at the
site's root (prbench/urls.py).
"""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

from experiments.models import WorkerLease
from prbench.queues import get_connection

OK = "ok"


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": OK})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database(), "redis": _redis()}
    checks["workers"] = _workers() if checks["database"] == OK else "unknown: the database is not answering"
    ready = checks["database"] == OK and checks["redis"] == OK and checks["workers"].endswith("live")
    return JsonResponse({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return f"failing: {type(exc).__name__}"
    return OK


def _redis() -> str:
    try:
        get_connection().ping()
    except (RedisError, OSError) as exc:
        return f"failing: {type(exc).__name__}"
    return OK


def _workers() -> str:
    try:
        live = WorkerLease.objects.filter(expires_at__gt=timezone.now()).count()
    except DatabaseError as exc:
        return f"failing: {type(exc).__name__}"
    return f"{live} live" if live else "none: no worker holds a live lease"
