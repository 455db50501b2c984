"""``/metrics`` for Prometheus: not public, never cached, cheap.

Who may scrape: a request with ``Authorization: Bearer <PRBENCH_METRICS_TOKEN>``, or one whose
address (REMOTE_ADDR: no proxy header is trusted for addresses anywhere in PRBench) is inside
``PRBENCH_METRICS_ALLOWED_NETWORKS``. Anyone else gets the site's ordinary 404, so the
endpoint's existence is not revealed.

What is served: the samples every process recorded (prbench/metrics.py), merged from
``PROMETHEUS_MULTIPROC_DIR`` when it is set, else this process's own; plus the live state read
now from Redis and Postgres by ``LiveStateCollector``, three cheap counts. In ``experiments``
because two of those counts are its runs and worker leases.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from experiments.models import Run, RunStatus, WorkerLease
from prbench.queues import get_queue, needs_queues

logger = logging.getLogger(__name__)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        raise Http404("Page not found")
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)


def may_scrape(request: HttpRequest) -> bool:
    return _has_token(request) or _from_allowed_network(request)


def _has_token(request: HttpRequest) -> bool:
    expected = settings.PRBENCH_METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def _from_allowed_network(request: HttpRequest) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 from a dual-stack socket is 127.0.0.1
    return any(address in network for network in settings.PRBENCH_METRICS_ALLOWED_NETWORKS)


def scrape_registry() -> CollectorRegistry:
    """A registry for one scrape. In multiprocess mode it must hold only the files' collector
    (the metrics themselves are registered in the default registry, whose in-memory values
    are not what this process wrote to its file), plus our scrape-time collector."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(REGISTRY)  # a registry collects like any collector
    registry.register(LiveStateCollector())
    return registry


class LiveStateCollector(Collector):
    """Read when Prometheus asks: jobs waiting per RQ queue, workers holding a live lease (as
    /readyz counts them), runs running. A part that does not answer is left out of this scrape
    (and logged by its error's class), so a down Redis does not hide the database's figures."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._guarded("queue depth", _queue_depth)
        yield from self._guarded("live workers", _live_workers)
        yield from self._guarded("running runs", _running_runs)

    @staticmethod
    def _guarded(what: str, read) -> Iterator[GaugeMetricFamily]:
        try:
            family = read()
        except (DatabaseError, RedisError, OSError) as exc:
            logger.warning("metrics: %s could not be read (%s)", what, type(exc).__name__)
            return
        yield family


def _queue_depth() -> GaugeMetricFamily:
    family = GaugeMetricFamily("prbench_queue_jobs", "RQ jobs waiting in each queue, not started", labels=["queue"])
    for name in [*settings.RQ_QUEUES, *sorted(needs_queues())]:  # and the queues of work needing a worker's Python
        family.add_metric([name], get_queue(name).count)
    return family


def _live_workers() -> GaugeMetricFamily:
    live = WorkerLease.objects.filter(expires_at__gt=timezone.now()).count()
    return GaugeMetricFamily("prbench_workers_live", "Worker processes holding a live lease", value=live)


def _running_runs() -> GaugeMetricFamily:
    running = Run.objects.filter(status=RunStatus.RUNNING).count()
    return GaugeMetricFamily("prbench_runs_running", "Runs whose status is running", value=running)
