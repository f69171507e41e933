"""What is PostgreSQL's own in `PostgresStore`: schema creation, versions, NOTIFY, restarts, fork.

The store contract itself runs on PostgreSQL in ``test_store_conformance.py`` (the
``store`` fixture); these tests use the session's private server (``pg_server``), each
with a schema of its own where it creates one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cronlock import Admin, ConfigurationError, CronRunner, FakeClock
from cronlock.stores.sql.schema import SCHEMA_VERSION, SchemaError
from cronlock.stores.types import ClaimReply, ClaimStatus, Retention, SlotClaim
from cronlock.testing import wait_until
from tests import procs
from tests.history import ROOT

psycopg = pytest.importorskip("psycopg")
psycopg_pool = pytest.importorskip("psycopg_pool")
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
    """A schema name of this test's own (not created), dropped afterwards."""
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


def schema_exists(pg_server: Any, name: str) -> bool:
    with pg_server.connect() as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [name]).fetchone()
        return row is not None


CREATOR = """
import sys, time
from cronlock.stores.postgres import PostgresStore
from cronlock.stores.types import ClaimReply, Retention, SlotClaim
dsn, schema, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = PostgresStore(dsn, prefix="many", schema=schema)
while time.time() < start:
    time.sleep(0.001)
[reply] = store.claim_slots([SlotClaim("a", 1000, sys.argv[4], 30000, 3, "skip", "h",
                                       Retention(10, 0))])
print(reply.status.value)
"""


@pytest.mark.slow
def test_many_processes_creating_the_schema_at_once_all_succeed(
    pg_server: Any, schema: str
) -> None:
    """Six processes meet an empty database at the same instant: every one creates or
    finds the tables (none fails), one claim wins, the others see the slot taken."""
    start = time.time() + 3  # after every interpreter has imported cronlock
    args = [pg_server.dsn, schema, str(start)]
    children = [
        procs.spawn(
            [sys.executable, "-c", CREATOR, *args, f"owner{i}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    outputs = []
    try:
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            outputs.append(out.strip())
    finally:
        procs.end_all(children, timeout=5)
    assert sorted(outputs) == ["taken"] * 5 + ["won"]
    with pg_server.connect() as conn:
        rows = conn.execute(f'SELECT name, value FROM "{schema}".meta').fetchall()
    assert rows == [("schema_version", str(SCHEMA_VERSION))]


def test_create_schema_false_on_an_empty_database_is_refused_naming_it(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """No tables and ``create_schema=False``: a `SchemaError` naming the schema (not an
    outage to retry), and nothing is created."""
    store = PostgresStore(pg_server.dsn, prefix="p", schema=schema, create_schema=False)
    stores.append(store)
    with pytest.raises(SchemaError, match=f"absent.*{schema}.*create_schema=False"):
        store.sync(None)
    with pytest.raises(SchemaError):
        claim(store, "me")
    assert not schema_exists(pg_server, schema)
    stores.append(PostgresStore(pg_server.dsn, prefix="p", schema=schema))
    stores[-1].ensure_schema()
    assert claim(store, "me").status is ClaimStatus.WON  # once created, the same store works


def test_a_newer_schema_version_is_refused_naming_both_versions(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """Tables written by a newer cronlock: refused, the message names both versions."""
    first = PostgresStore(pg_server.dsn, prefix="p", schema=schema)
    stores.append(first)
    first.ensure_schema()
    newer = SCHEMA_VERSION + 1
    with pg_server.connect() as conn:
        conn.execute(
            f"UPDATE \"{schema}\".meta SET value = %s WHERE name = 'schema_version'", [str(newer)]
        )
    later = PostgresStore(pg_server.dsn, prefix="p", schema=schema)
    stores.append(later)
    with pytest.raises(SchemaError) as refused:
        claim(later, "me")
    message = str(refused.value)
    assert f"version {newer}" in message
    assert f"version {SCHEMA_VERSION}" in message
    assert "upgrade cronlock" in message


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app@127.0.0.1:5432",
        "postgresql://app@127.0.0.1:5432/",
        "host=127.0.0.1 user=app",
    ],
)
def test_a_dsn_without_a_database_is_refused_naming_it(dsn: str) -> None:
    """libpq would pick the user's name as the database: refused, naming the DSN."""
    with pytest.raises(ConfigurationError, match="must name its database") as refused:
        PostgresStore(dsn)
    assert "127.0.0.1" in str(refused.value)


def test_a_password_never_appears_in_messages() -> None:
    """The DSN is named with its password removed, in errors and in `location`."""
    with pytest.raises(ConfigurationError) as refused:
        PostgresStore("postgresql://app:s3cret@127.0.0.1:5432")
    assert "s3cret" not in str(refused.value)
    store = PostgresStore("postgresql://app:s3cret@127.0.0.1:5432/app", prefix="p")
    assert "s3cret" not in store.pg.location()
    assert "s3cret" not in repr(store)
    assert "dbname=app" in store.pg.location()


@pytest.mark.parametrize("bad", ["bad-name", "1abc", "pg_catalog", "a" * 64, "", 'x"y', 3])
def test_a_bad_schema_name_is_refused_before_anything_is_written(
    pg_server: Any, bad: object
) -> None:
    """A schema name that is not a plain identifier: refused, naming it, without connecting."""
    with pytest.raises(ConfigurationError, match="schema") as refused:
        PostgresStore(pg_server.dsn, schema=bad)  # type: ignore[arg-type]
    assert repr(bad) in str(refused.value)


def test_a_bad_dsn_value_is_refused() -> None:
    """Not a connection string at all: refused, naming what was given."""
    with pytest.raises(ConfigurationError, match="not a PostgreSQL connection string"):
        PostgresStore("host=x dbname")
    with pytest.raises(ConfigurationError, match="DSN"):
        PostgresStore(42)  # type: ignore[arg-type]


def test_notify_wakes_a_runner_for_a_trigger_without_waiting_for_its_poll(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """A manual run queued by `Admin` reaches a runner listening on NOTIFY at once, though
    the runner would poll only every 60 s."""
    store = PostgresStore(pg_server.dsn, prefix="wake", schema=schema)
    stores.append(store)
    ran = threading.Event()
    runner = CronRunner(store, clock=FakeClock(1_800_000_000.0), poll_interval=60)

    @runner.interval(seconds=3600, key="job")
    def job() -> None:
        ran.set()

    runner.start()
    try:
        wait_until(lambda: runner.health().listening, timeout=10)
        wait_until(lambda: store.registry_entry("job"), timeout=10)
        asked = time.monotonic()
        Admin(store, prefix="wake").trigger("job")
        assert ran.wait(5), "the trigger waited for the poll"
        assert time.monotonic() - asked < 5
    finally:
        runner.stop(timeout=5)


def test_events_are_heard_only_on_their_own_schema_and_prefix(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """Each schema+prefix has its channel (within 63 bytes even for a long prefix)."""
    long_prefix = "p" * 200
    mine = PostgresStore(pg_server.dsn, prefix=long_prefix, schema=schema)
    other = PostgresStore(pg_server.dsn, prefix=long_prefix[:-1], schema=schema)
    stores += [mine, other]
    assert len(mine.pg.channel.encode()) <= 63
    assert mine.pg.channel != other.pg.channel
    subscription = mine.subscribe()
    assert subscription is not None
    try:
        other.publish({"type": "wake", "n": 1})
        mine.publish({"type": "wake", "n": 2})
        assert subscription.get(5) == {"type": "wake", "n": 2}
        assert subscription.get(0.2) is None
    finally:
        subscription.close()


def test_a_restarted_server_raises_one_of_the_errors_then_works_again(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """The server killed and started again: a pooled call and a subscription fail with one
    of ``store.errors``; the store then reconnects by itself and the data are intact."""
    store = PostgresStore(pg_server.dsn, prefix="restart", schema=schema, timeout=2)
    stores.append(store)
    won = claim(store, "me")
    subscription = store.subscribe()
    assert subscription is not None
    try:
        pg_server.restart()
        with pytest.raises(store.errors):
            store.ping()
        with pytest.raises(store.errors):
            subscription.get(5)
    finally:
        subscription.close()

    def answers() -> bool:
        try:
            store.ping()
        except store.errors:
            return False
        return True

    wait_until(answers, timeout=15, interval=0.1)
    again = claim(store, "other")
    assert again.status is ClaimStatus.TAKEN  # the claim before the restart survived it
    assert again.lease_until_ms == won.lease_until_ms


def test_a_forked_child_uses_the_store_on_connections_of_its_own(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """After fork, the child claims through a pool of its own; the parent's connection is
    untouched (it still works, on the same backend process as before)."""
    store = PostgresStore(pg_server.dsn, prefix="fork", schema=schema, max_connections=1)
    stores.append(store)
    store.ensure_schema()
    with store.pg.transaction() as cur:
        cur.execute("SELECT pg_backend_pid()")
        before = cur.fetchone()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            reply = claim(store, "child")
            code = 0 if reply.status is ClaimStatus.WON else 2
            store.close()
        finally:
            os._exit(code)
    assert procs.reap(pid) == 0
    with store.pg.transaction() as cur:
        cur.execute("SELECT pg_backend_pid()")
        assert cur.fetchone() == before  # the parent's connection survived the child's exit
    assert claim(store, "parent").status is ClaimStatus.TAKEN  # the child's claim holds


def test_a_pool_passed_in_is_used_and_left_open(
    pg_server: Any, schema: str, stores: list[PostgresStore]
) -> None:
    """A `ConnectionPool` of the application's: the store uses it in the process that made
    it (a forked child opens a pool of its own), and `close` leaves it open."""
    with psycopg_pool.ConnectionPool(pg_server.dsn, min_size=1, max_size=2) as pool:
        store = PostgresStore(pool, prefix="pool", schema=schema)
        stores.append(store)
        before = pool.get_stats().get("requests_num", 0)
        pid = os.fork()
        if pid == 0:  # the child: never return into pytest
            code = 1
            try:
                won = claim(store, "child").status is ClaimStatus.WON
                untouched = pool.get_stats().get("requests_num", 0) == before
                code = 0 if won and untouched else 2
                store.close()
            finally:
                os._exit(code)
        assert procs.reap(pid) == 0
        assert claim(store, "me").status is ClaimStatus.TAKEN  # the child's claim holds
        assert pool.get_stats().get("requests_num", 0) > before
        store.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_importing_the_stores_needs_no_psycopg() -> None:
    """`import cronlock.stores` works without psycopg; naming PostgresStore says what is missing."""
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import cronlock, cronlock.stores\n"
        "try:\n"
        "    cronlock.stores.PostgresStore\n"
        "except ImportError as exc:\n"
        "    print('missing', exc.name)\n"
    )
    out = procs.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("missing psycopg", "missing psycopg_pool")
