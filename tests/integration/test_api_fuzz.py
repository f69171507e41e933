"""Property-based fuzz of the management API: schemathesis against the live Flask app.

Requests are generated from the blueprint's own OpenAPI document (``/api/openapi.json``),
valid ones and invalid ones (wrong types, missing and extra fields, bad bodies), sent
with an authorized token to a real Redis. Every answer must match the document; a 4xx
must be a JSON error and must leave the store exactly as it was; nothing is a 500.

Bounded for the fast suite: a few examples per operation, no shrinking (a failure
still prints the request that caused it). schemathesis needs Python 3.11+; on older
interpreters the test is skipped, naming the reason.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import redis

from cronlock.testing import RedisServer
from tests.integration.test_flask_api import TOKEN, Setup, make_setup

__all__ = ["make_setup"]  # the fixture, shared with test_flask_api

schemathesis = pytest.importorskip(
    "schemathesis", reason="schemathesis (the test extra, Python 3.11+) is not installed"
)
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    allow_header_conformance,
    positive_data_acceptance,
)

EXAMPLES = 12  # per operation and generation mode: the fuzz stays within seconds
PREFIX_GLOB = "api-test:*"


@pytest.fixture
def api(server_factory: Callable[..., RedisServer], make_setup: Callable[..., Setup]) -> Setup:
    """An app on a private server of its own (the fuzz writes schedules there)."""
    server = server_factory()
    setup = make_setup(server.url, token=TOKEN)
    setup.raw = redis.Redis.from_url(server.url)  # type: ignore[attr-defined]
    return setup


@pytest.fixture
def api_schema(api: Setup) -> Any:
    schema = schemathesis.openapi.from_wsgi("/cronlock/api/openapi.json", api.app)
    schema.config.generation.update(max_examples=EXAMPLES, no_shrink=True, deterministic=True)
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


def _snapshot(client: redis.Redis) -> dict[bytes, Any]:
    """Every key of the app's prefix with its serialized value."""
    return {key: client.dump(key) for key in sorted(client.scan_iter(PREFIX_GLOB))}


# /health answers 503 by design while the runner is not started (a probe's answer, not a
# server error); tests/integration/test_flask_api.py covers it.
@schema.exclude(path="/health").parametrize()
@settings(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_every_answer_matches_the_document_and_a_refusal_writes_nothing(
    case: Any, api: Setup
) -> None:
    """No 500; the answer conforms; a 4xx is {"error": ...} and the store is unchanged."""
    client = api.raw  # type: ignore[attr-defined]
    before = _snapshot(client)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    response = case.call(headers=auth)
    # The document types every field but cannot spell every rule (a cron expression, a
    # timezone name, a task no runner has): a schema-valid request may still be a 400,
    # which is what this test asks of a bad one. And a job key may hold "/", so
    # GET /api/jobs/{key} also matches ".../pause": the Allow header of the three POST
    # routes honestly lists GET. Every other check applies.
    excluded = [positive_data_acceptance]
    if case.path.endswith(("/pause", "/resume", "/trigger")):
        excluded.append(allow_header_conformance)
    case.validate_response(response, excluded_checks=excluded, headers=auth)
    assert response.status_code < 500, response.text
    if 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body.get("error"), str), body
        assert body["error"], body
        assert _snapshot(client) == before, (case.method, case.path, body)
