"""The real PostgreSQL server the audit-log tests use, and a schema of their own on it.

The server is ``CRONLOCK_TEST_POSTGRES_DSN`` or ``postgresql://postgres@127.0.0.1:5432/test``
(trust auth). Each test creates its own schema (a unique name) and drops it afterwards.
Without a reachable server these tests skip, naming the DSN; under ``CI=true`` they fail
instead. The fixtures are made visible to the integration tests by their conftest.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

DSN = os.environ.get("CRONLOCK_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema on the real server, dropped after the test."""
    psycopg = pytest.importorskip("psycopg")
    try:
        conn = psycopg.connect(DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        reason = (
            f"!!! PostgreSQL NOT REACHABLE at {DSN!r} ({exc}); the PostgresHistory tests "
            "did not run. Set CRONLOCK_TEST_POSTGRES_DSN to a server with trust auth. !!!"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " -- CI must have one", pytrace=False)
        pytest.skip(reason)
    name = f"cronlock_test_{uuid.uuid4().hex[:12]}"
    with conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        try:
            yield name
        finally:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture
def histories() -> Iterator[list[Any]]:
    """Histories made by a test; all closed (writer stopped) before its schema is dropped."""
    made: list[Any] = []
    yield made
    for history in made:
        history.close(timeout=2)


def history(made: list[Any], dsn: str, schema: str, **kw: Any) -> Any:
    """A PostgresHistory in ``schema`` that flushes every 50 ms, closed after the test."""
    from cronlock.postgres import PostgresHistory

    kw.setdefault("flush_interval", 0.05)
    made.append(PostgresHistory(dsn, schema=schema, **kw))
    return made[-1]


def table_rows(schema: str, table: str = "cronlock_runs") -> list[dict[str, Any]]:
    """Every row of the audit table, by slot and id, as column -> value."""
    import psycopg

    from cronlock.postgres import COLUMNS

    with psycopg.connect(DSN) as conn:
        cur = conn.execute(
            f'SELECT {", ".join(COLUMNS)} FROM "{schema}"."{table}" ORDER BY slot, attempt, id'
        )
        return [dict(zip(COLUMNS, row)) for row in cur.fetchall()]
