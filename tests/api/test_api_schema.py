"""Every operation of /api/openapi.json fuzzed against the app with schemathesis: no server
error, and every response as the schema describes it (a status code it lists, its content type,
its body's schema).

One test walks all the operations the document lists, so an endpoint added anywhere is fuzzed
without a line here. Each operation is tried three ways, a bounded and derandomized number of
examples each: everything generated (its ids are then unknown: the 404 paths), the path ids
set to the organisation's real objects (a finished run with judged attempts, its experiment
and dataset) with the rest generated, and the same with data the schema rules out (the 422
paths). Requests carry an API key with every scope of the organisation that owns the data.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from prbench.wsgi import application
from tests.conftest import make_api_key

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 12  # per operation and way of trying it: the whole document in well under two minutes


@pytest.fixture
def same_connection_for_the_app():
    """The WSGI handler closes the database connection after each request when it is in a
    transaction (the test's); Django's test client unhooks that for the same reason."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


# The per-key throttle has its own test; here it would turn the later operations into 429s.
@override_settings(PRBENCH_API_REQUESTS_PER_MINUTE=0)
def test_every_operation_conforms_to_the_schema(org, real_ids, same_connection_for_the_app):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
    headers = {"Authorization": f"Bearer {make_api_key(org, ['read', 'run', 'admin'], name='fuzz')}"}
    failures: dict[str, str] = {}
    answered: dict[str, set[int]] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {"/api/runs/{run_id}/leaderboards", "/api/runs/{run_id}/attempts.parquet"} <= {op.path for op in operations}
    for operation in operations:
        known = {name: real_ids[name] for name in _names(operation.path_parameters) if name in real_ids}
        query = {name: real_ids[name] for name in _names(operation.query) if name in real_ids} or None
        ways = [
            ("generated", operation.as_strategy(GenerationMode.POSITIVE)),
            ("real ids", operation.as_strategy(GenerationMode.POSITIVE, path_parameters=known, query=query)),
            ("invalid", operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=known)),
        ]
        for way, strategy in ways:
            statuses = answered.setdefault(f"{operation.method.upper()} {operation.path} ({way})", set())
            try:
                _fuzz(strategy, headers, statuses)
            except (Exception, BaseExceptionGroup) as exc:  # reported together, every operation's
                failures[f"{operation.method.upper()} {operation.path} ({way})"] = str(exc)[:2000]
    assert not failures, "\n\n".join(f"{name}:\n{problem}" for name, problem in failures.items())
    # The real ids reached the real objects: every read answered 200 at least once.
    unread = [
        name
        for name, statuses in answered.items()
        if name.startswith("GET") and "(real ids)" in name and 200 not in statuses
    ]
    assert not unread, unread


def _names(parameters: Any) -> list[str]:
    return [parameter.name for parameter in parameters]


def _fuzz(strategy: Any, headers: dict[str, str], statuses: set[int]) -> None:
    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the first failure is reported as it is
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        statuses.add(case.call_and_validate(headers=headers, checks=CHECKS).status_code)

    check()
