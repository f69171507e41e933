"""What the PostgresStore tests share: a claim, a schema of the test's own, stores closed.

Import the fixtures into a test module (``from tests.pgstores import schema, stores``):
this ``schema`` fixture (a name, not created) stands in for the audit-log one there.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cronlock.stores.types import ClaimReply, Retention, SlotClaim

KEEP = Retention(10, 0)


def claim(store: Any, owner: str, slot_ms: int = 1_000) -> ClaimReply:
    [reply] = store.claim_slots(
        [SlotClaim("a", slot_ms, owner, 30_000, 3, "skip", f"h:{owner}", KEEP)]
    )
    assert isinstance(reply, ClaimReply), reply
    return reply


@pytest.fixture
def schema(pg_server: Any) -> Iterator[str]:
    """A schema name of this test's own (not created), dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    with pg_server.connect(autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def stores() -> Iterator[list[Any]]:
    """Stores a test made; closed after it."""
    made: list[Any] = []
    yield made
    for store in made:
        store.close()
