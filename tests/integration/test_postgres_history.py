"""PostgresHistory against the real PostgreSQL server of this machine, fed by real runs.

The server and the schema of each test come from ``tests/pg.py``.
Outages are simulated with a TCP forwarder in front of the server that the test switches
off and on; the machine's PostgreSQL itself is never stopped. Without a reachable server
these tests skip, naming the DSN; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import pytest
import redis

from cronlock import ConfigurationError, CronRunner, FakeClock, JobContext
from cronlock.observers import RunRecord
from cronlock.testing import free_port, wait_until
from tests import pg, procs

psycopg = pytest.importorskip("psycopg")
from cronlock.postgres import COLUMNS, PostgresHistory  # noqa: E402

DSN = pg.DSN
T0 = 1_800_000_000.0  # a multiple of 10 s
PREFIX = "pg"


def _dsn_with(host: str, port: int) -> str:
    params = psycopg.conninfo.conninfo_to_dict(DSN)
    params.update(host=host, port=str(port))
    return str(psycopg.conninfo.make_conninfo(**params))


def _history(made: list[PostgresHistory], dsn: str, schema: str, **kw: Any) -> PostgresHistory:
    return cast(PostgresHistory, pg.history(made, dsn, schema, **kw))


def _rows(schema: str, table: str = "cronlock_runs") -> list[dict[str, Any]]:
    return pg.table_rows(schema, table)


def _record(key: str = "job", status: str = "succeeded", token: int = 1) -> RunRecord:
    now = datetime.now(timezone.utc)
    return RunRecord(key, now, 1, token, "host:1:r", "r", status, now, now + timedelta(seconds=1))


def _step_through(runner: CronRunner, clock: FakeClock, slots: int) -> int:
    ran = 0
    for step in range(slots):
        clock.set(T0 + step * 10 + 0.001)
        ran += runner.run_pending()
    return ran


class Forwarder:
    """A TCP forwarder to PostgreSQL that a test switches off (refusing) and on."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = False
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self.up:
                conn.close()  # "server closed the connection unexpectedly"
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                conn.close()
                continue
            conn.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._pairs.append((conn, upstream))
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def set_up(self, up: bool) -> None:
        """Switch forwarding on, or off (cutting every open connection)."""
        self.up = up
        if not up:
            with self._lock:
                pairs, self._pairs = self._pairs, []
            for pair in pairs:
                for sock in pair:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()

    def close(self) -> None:
        self._stop.set()
        self.set_up(False)
        self._listener.close()


@pytest.fixture
def forwarder() -> Iterator[Forwarder]:
    """A forwarder to the real server, switched off at first."""
    params = psycopg.conninfo.conninfo_to_dict(DSN)
    fwd = Forwarder((str(params.get("host", "127.0.0.1")), int(params.get("port", 5432))))
    yield fwd
    fwd.close()


# -- records from real runs ---------------------------------------------------------------


def test_runs_are_written_with_their_fields(
    client: redis.Redis, schema: str, histories: list[PostgresHistory]
) -> None:
    """Three runs of a real runner become three rows with job, slot, attempt, token, owner."""
    history = _history(histories, DSN, schema)
    clock = FakeClock(T0 - 1)
    runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, observers=[history])
    seen: list[JobContext] = []

    @runner.interval(seconds=10, key="sync", catch_up=3)
    def sync(ctx: JobContext) -> None:
        seen.append(ctx)

    assert _step_through(runner, clock, 3) == 3
    assert history.close(timeout=30)
    rows = _rows(schema)
    assert [r["job"] for r in rows] == ["sync"] * 3
    assert [r["slot"] for r in rows] == [ctx.slot for ctx in seen]
    assert [r["fencing_token"] for r in rows] == [ctx.fencing_token for ctx in seen]
    for row in rows:
        assert row["attempt"] == 1
        assert row["status"] == "succeeded"
        assert row["owner"] == runner.holder
        assert row["runner_id"] == runner.runner_id
        assert row["started_at"] <= row["finished_at"]
        span = (row["finished_at"] - row["started_at"]).total_seconds()
        assert row["duration"] == pytest.approx(span, abs=1e-3)
        assert row["error_type"] is None
        assert row["traceback"] is None
        assert row["kind"] == "scheduled"
        assert row["trigger_id"] is None
    assert history.written == 6  # each run: its start row, then its end
    assert history.dropped == 0


def test_failures_carry_error_type_and_traceback(
    client: redis.Redis, schema: str, histories: list[PostgresHistory]
) -> None:
    """A handler that raises is stored as failed, with its exception type and traceback."""
    history = _history(histories, DSN, schema)
    clock = FakeClock(T0 - 1)
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=clock,
        default_ttl=5,
        observers=[history],
        on_error=lambda error, context: None,
    )

    @runner.interval(seconds=10, key="broken", catch_up=3)
    def broken() -> None:
        raise ValueError("the ledger does not balance")

    _step_through(runner, clock, 1)
    assert history.close(timeout=30)
    [row] = _rows(schema)
    assert row["status"] == "failed"
    assert row["error_type"] == "ValueError"
    assert "Traceback" in row["traceback"]
    assert "the ledger does not balance" in row["traceback"]


def test_read_returns_run_records_newest_first(
    schema: str, histories: list[PostgresHistory]
) -> None:
    """read() gives RunRecords back, newest first, filtered by job and limited."""
    history = _history(histories, DSN, schema)
    assert history.read() == []  # no table yet: empty, not an error
    for token in range(5):
        history.run_finished(_record("a" if token % 2 else "b", token=token))
        time.sleep(0.002)  # distinct started_at values
    assert history.close(timeout=30)
    records = history.read(limit=3)
    assert [r.fencing_token for r in records] == [4, 3, 2]
    assert all(isinstance(r, RunRecord) for r in records)
    assert records[0].started_at.tzinfo == timezone.utc
    assert [r.fencing_token for r in history.read(job="a")] == [3, 1]


def test_table_has_the_documented_columns_and_indexes(
    schema: str, histories: list[PostgresHistory]
) -> None:
    """The created table has the documented columns and its two indexes."""
    history = _history(histories, DSN, schema, table="audit")
    history.run_finished(_record())
    assert history.close(timeout=30)
    with psycopg.connect(DSN) as conn:
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'audit'",
                [schema],
            )
        }
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'audit'",
                [schema],
            )
        ]
    assert columns == {"id", *COLUMNS}
    assert any("(job, started_at)" in d for d in indexes)
    assert any(d.endswith("(started_at)") for d in indexes)
    assert any("(job, slot)" in d for d in indexes)
    assert any(d.startswith("CREATE UNIQUE INDEX") and d.endswith("(run_id)") for d in indexes)


def test_replicas_creating_the_table_together_do_not_race(
    schema: str, histories: list[PostgresHistory]
) -> None:
    """Six histories writing their first row at once create one table; every row is kept."""
    many = [_history(histories, DSN, schema) for _ in range(6)]
    barrier = threading.Barrier(len(many))

    def first_row(history: PostgresHistory, token: int) -> None:
        barrier.wait()
        history.run_finished(_record(token=token))

    threads = [threading.Thread(target=first_row, args=(h, i)) for i, h in enumerate(many)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for history in many:
        assert history.close(timeout=30)
    assert sorted(r["fencing_token"] for r in _rows(schema)) == list(range(6))


# -- PostgreSQL down ----------------------------------------------------------------------


def test_unreachable_postgres_neither_breaks_nor_slows_runs(
    client: redis.Redis,
    schema: str,
    histories: list[PostgresHistory],
    caplog: pytest.LogCaptureFixture,
    refused_port: int,
) -> None:
    """With PostgreSQL unreachable, runs go on; past the buffer, records drop with one WARNING."""
    caplog.set_level(logging.WARNING, logger="cronlock.postgres")
    history = _history(histories, _dsn_with("127.0.0.1", refused_port), schema, buffer=3)
    clock = FakeClock(T0 - 1)
    runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, observers=[history])
    ran: list[int] = []

    @runner.interval(seconds=10, key="tick", catch_up=3)
    def tick(ctx: JobContext) -> None:
        ran.append(ctx.slot_ms)

    assert _step_through(runner, clock, 10) == 10
    assert len(ran) == 10
    assert history.pending == 3
    assert history.dropped == 17  # 10 runs: 20 writes (start and end), 3 kept
    assert history.written == 0
    drops = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(drops) == 1  # rate-limited: one WARNING, not one per record
    assert drops[0].levelno == logging.WARNING
    wait_until(lambda: any("cannot write" in r.getMessage() for r in caplog.records))
    assert not history.close(timeout=0.5)  # nothing could be written
    wait_until(lambda: history.pending == 0)  # the writer gives up soon after the timeout
    assert history.dropped == 20


def test_a_hanging_postgres_does_not_hold_up_runs(
    client: redis.Redis, schema: str, histories: list[PostgresHistory]
) -> None:
    """A server that accepts TCP but never answers stalls only the writer thread, not runs."""
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel completes the handshake
    try:
        port = silent.getsockname()[1]
        history = _history(histories, _dsn_with("127.0.0.1", port), schema, connect_timeout=5)
        clock = FakeClock(T0 - 1)
        runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, observers=[history])

        @runner.interval(seconds=10, key="tick", catch_up=3)
        def tick() -> None:
            pass

        started = time.monotonic()
        assert _step_through(runner, clock, 10) == 10
        # A synchronous write would wait connect_timeout (5 s) per run: 50 s. Loose bound.
        assert time.monotonic() - started < 4
        assert history.pending == 20
    finally:
        silent.close()


def test_writes_resume_when_postgres_comes_back(
    client: redis.Redis,
    schema: str,
    histories: list[PostgresHistory],
    forwarder: Forwarder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rows buffered during an outage (also one that cuts an open connection) are written after."""
    caplog.set_level(logging.INFO, logger="cronlock.postgres")
    history = _history(histories, _dsn_with("127.0.0.1", forwarder.port), schema)
    clock = FakeClock(T0 - 1)
    runner = CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, observers=[history])

    @runner.interval(seconds=10, key="tick", catch_up=3)
    def tick() -> None:
        pass

    def run_slot(step: int) -> None:
        clock.set(T0 + step * 10 + 0.001)
        assert runner.run_pending() == 1

    run_slot(0)  # down from the start: never connected yet
    run_slot(1)
    wait_until(lambda: any("cannot write" in r.getMessage() for r in caplog.records))
    assert history.written == 0
    forwarder.set_up(True)
    wait_until(lambda: history.written == 4, timeout=30)
    forwarder.set_up(False)  # cuts the writer's open connection
    run_slot(2)
    run_slot(3)
    time.sleep(0.3)  # let it fail at least once on the cut connection
    assert history.written == 4
    forwarder.set_up(True)
    wait_until(lambda: history.written == 8, timeout=30)
    assert history.dropped == 0
    assert len(_rows(schema)) == 4
    assert any("writing again" in r.getMessage() for r in caplog.records)


# -- process lifecycle ----------------------------------------------------------------------


def test_a_forked_child_writes_through_its_own_connection(
    schema: str, histories: list[PostgresHistory]
) -> None:
    """A forked child writes through a fresh connection; the parent keeps its own."""
    history = _history(histories, DSN, schema, flush_interval=0.05)
    history.run_finished(_record(token=1))
    wait_until(lambda: history.written == 1, timeout=30)
    conn = history.writer.conn
    assert conn is not None
    backend = conn.info.backend_pid
    history.flush_interval = 60.0  # the next row waits in the parent's buffer over the fork
    history.run_finished(_record(token=2))
    assert history.pending == 1
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 1
        try:
            if (
                history.pending == 0
                and history.writer.conn is None
                and history.writer.thread is None
            ):
                history.flush_interval = 0.05
                history.run_finished(_record(key="child", token=3))
                code = 0 if history.close(timeout=20) and history.written == 1 else 2
        finally:
            os._exit(code)
    assert procs.reap(pid) == 0
    assert history.close(timeout=30)
    conn = history.writer.conn
    assert conn is None or conn.info.backend_pid == backend
    rows = _rows(schema)
    assert sorted((r["job"], r["fencing_token"]) for r in rows) == [
        ("child", 3),
        ("job", 1),
        ("job", 2),
    ]
    assert history.written == 2


def test_records_after_close_are_dropped_and_counted(
    schema: str, histories: list[PostgresHistory]
) -> None:
    """After close(), new records are not queued (no writer restarts) but are counted."""
    history = _history(histories, DSN, schema)
    assert history.close()
    history.run_finished(_record())
    assert history.dropped == 1
    assert history.pending == 0
    assert history.writer.thread is None


def test_construction_checks_its_arguments_and_starts_nothing() -> None:
    """Bad arguments raise ConfigurationError; a valid history starts no thread, no connection."""
    for kwargs in (
        {"dsn": 42},
        {"dsn": "host=x port"},
        {"dsn": DSN, "buffer": 0},
        {"dsn": DSN, "batch": True},
        {"dsn": DSN, "flush_interval": 0},
        {"dsn": DSN, "table": ""},
    ):
        with pytest.raises(ConfigurationError):
            PostgresHistory(**kwargs)
    threads = threading.active_count()
    history = PostgresHistory(_dsn_with("127.0.0.1", free_port()))
    assert threading.active_count() == threads
    assert history.writer.thread is None
    assert history.writer.conn is None
    assert history.close()
