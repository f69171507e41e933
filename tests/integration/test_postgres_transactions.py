"""PostgresStore's transactions: rolled back on any error, and bounded by server timeouts.

A transaction is pipelined (see ``cronlock.stores.postgres.backend``); these tests check
that an error anywhere in it leaves nothing behind, and that a session frozen while it
holds a job's row lock is cut off by the server instead of holding every replica up.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cronlock.stores.types import ClaimReply, ClaimStatus, Retention, SlotClaim

psycopg = pytest.importorskip("psycopg")
from cronlock.stores.postgres import PostgresStore  # noqa: E402

KEEP = Retention(10, 0)


def claim(store: PostgresStore, owner: str, slot_ms: int = 1_000) -> ClaimReply:
    [reply] = store.claim_slots(
        [SlotClaim("a", slot_ms, owner, 30_000, 3, "skip", f"h:{owner}", KEEP)]
    )
    assert isinstance(reply, ClaimReply), reply
    return reply


@pytest.fixture
def schema(pg_server: Any) -> Iterator[str]:
    """A schema name of this test's own, dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    with pg_server.connect(autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def stores() -> Iterator[list[PostgresStore]]:
    """Stores a test made; closed after it."""
    made: list[PostgresStore] = []
    yield made
    for store in made:
        store.close()


def test_an_error_inside_a_transaction_rolls_it_back_and_the_connection_is_reused(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """A write followed by a failing statement, and one followed by a Python error:
    neither is kept, and the same single connection serves the next call."""
    store = PostgresStore(pg_server.dsn, prefix="tx", schema=schema, max_connections=1)
    stores.append(store)
    store.ensure_schema()
    flags = store.pg.table("flags")
    insert = f"INSERT INTO {flags} (prefix, name, value) VALUES ('tx', ?, '1')"

    def failing_statement() -> None:
        with store.pg.transaction() as cur:
            cur.execute(insert, ["kept?"])
            cur.execute("SELECT * FROM no_such_table")
            cur.fetchall()

    def failing_caller() -> None:
        with store.pg.transaction() as cur:
            cur.execute(insert, ["kept too?"])
            raise RuntimeError("the caller failed")

    with pytest.raises(psycopg.errors.UndefinedTable):
        failing_statement()
    with pytest.raises(RuntimeError):
        failing_caller()
    with store.pg.transaction() as cur:
        cur.execute(f"SELECT name FROM {flags} WHERE prefix = 'tx'")
        assert cur.fetchall() == []
    assert claim(store, "me").status is ClaimStatus.WON


def test_a_session_frozen_inside_a_transaction_lets_go_of_its_row_locks(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """A process that froze while holding a job's row lock (here: a transaction left
    open) is cut off by the server after ``timeout``: another replica's claim then
    goes through instead of waiting for ever."""
    frozen = PostgresStore(pg_server.dsn, prefix="frz", schema=schema, timeout=1)
    other = PostgresStore(pg_server.dsn, prefix="frz", schema=schema, timeout=1)
    stores += [frozen, other]
    assert claim(frozen, "first").status is ClaimStatus.WON
    release = threading.Event()
    held = threading.Event()
    failed: list[BaseException] = []

    def hold_the_lock() -> None:
        try:
            with frozen.pg.transaction() as cur:
                cur.execute(
                    f"SELECT state FROM {frozen.pg.table('jobs')} WHERE prefix = 'frz' FOR UPDATE"
                )
                cur.fetchall()
                held.set()
                release.wait(10)
                cur.execute("SELECT 1")
                cur.fetchall()
        except BaseException as exc:  # the server ended the session: expected
            failed.append(exc)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert held.wait(5)
        started = time.monotonic()
        assert claim(other, "second", slot_ms=2_000).status is ClaimStatus.BUSY
        waited = time.monotonic() - started
    finally:
        release.set()
        holder.join(10)
    assert 0.4 < waited < 1, waited  # cut off at 0.5 s, before the claim's own 1 s limit
    assert failed
    assert isinstance(failed[0], frozen.errors)
