"""What is SQLite's own: one file shared by processes, its schema, its locking, bad input.

The claim contract itself runs on SQLite in ``test_store_conformance.py``; here are the
file, the processes that share it, and what a busy or foreign file does.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cronlock import CronRunner, FakeClock, JobContext
from cronlock.errors import ConfigurationError
from cronlock.runner.scheduler import CLAIM_RETRY_MS
from cronlock.stores import ClaimReply, ClaimStatus, SqliteStore
from cronlock.stores.sql.schema import SCHEMA_VERSION, SchemaError
from cronlock.stores.types import Retention, SlotClaim

T0 = 1_800_000_000.0


def slot_claim(key: str, owner: str, slot_ms: int = 1_000) -> SlotClaim:
    return SlotClaim(key, slot_ms, owner, 30_000, 3, "skip", f"h:1:{owner}", Retention(10, 0))


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (":memory:", "in-memory"),
        ("", "in-memory"),
        ("/nonexistent-dir-for-cronlock/jobs.db", "/nonexistent-dir-for-cronlock"),
        (42, "42"),
    ],
)
def test_a_path_that_cannot_be_shared_is_refused_naming_it(path: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        SqliteStore(path)


@pytest.mark.parametrize("timeout", [0, -1, "5", True, 601])
def test_a_bad_busy_timeout_is_refused_naming_it(tmp_path: Path, timeout: Any) -> None:
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        SqliteStore(tmp_path / "jobs.db", busy_timeout=timeout)
    assert not (tmp_path / "jobs.db").exists()  # refused before anything was written


def test_without_create_schema_an_empty_file_is_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db", create_schema=False)
    with pytest.raises(SchemaError, match=r"absent.*create_schema=False.*cronlock store init"):
        store.schedules()
    SqliteStore(tmp_path / "jobs.db").schedules()  # creates the tables
    assert store.schedules() == {}


def test_tables_of_a_newer_version_are_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    SqliteStore(path).ping()
    SqliteStore(path).schedules()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE cronlock_meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(SchemaError, match=rf"version 99.*version {SCHEMA_VERSION}"):
        SqliteStore(path).schedules()


def test_a_state_row_cronlock_did_not_write_fails_that_job_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    store.claim_slots([slot_claim("other", "me")])
    with sqlite3.connect(tmp_path / "jobs.db") as conn:
        conn.execute(
            "INSERT INTO cronlock_jobs (prefix, key, state) VALUES ('cronlock', 'bad', '[1, 2]')"
        )
    bad, good = store.claim_slots([slot_claim("bad", "me"), slot_claim("good", "me")])
    assert isinstance(bad, ClaimReply)
    assert isinstance(good, ClaimReply)
    assert bad.status is ClaimStatus.CORRUPT
    assert good.status is ClaimStatus.WON
    with sqlite3.connect(tmp_path / "jobs.db") as conn:
        [(raw,)] = conn.execute("SELECT state FROM cronlock_jobs WHERE key = 'bad'").fetchall()
    assert raw == "[1, 2]"  # left as it was


def test_a_busy_file_fails_the_claim_and_the_runner_goes_on(tmp_path: Path) -> None:
    """Another process holding the write lock past busy_timeout: the claim raises one of
    the store's errors, the runner counts it, and claims the same slot once it is free
    (the failure lost nothing)."""
    path = tmp_path / "jobs.db"
    store = SqliteStore(path, busy_timeout=0.2)
    clock = FakeClock(T0 + 0.001)
    runner = CronRunner(store, clock=clock)
    ran: list[int] = []

    @runner.interval(seconds=10, key="job")
    def job(ctx: JobContext) -> None:
        ran.append(ctx.slot_ms)

    store.schedules()  # the tables exist
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert runner.run_pending() == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert runner.statistics().redis_errors >= 1
    clock.set(T0 + CLAIM_RETRY_MS / 1000 + 0.002)  # the retry of the same slot is due
    assert runner.run_pending() == 1
    assert ran == [int(T0 * 1000)]


def _claim_in_a_child(path: str, owner: str, out: Any) -> None:
    store = SqliteStore(path)
    out.put(
        [r.status.value for r in store.claim_slots([slot_claim(f"k{i}", owner) for i in range(50)])]
    )  # type: ignore[union-attr]


def test_processes_starting_at_once_create_the_schema_and_one_wins_each_slot(
    tmp_path: Path,
) -> None:
    """Eight processes open a new file at once: no error, and each of 50 slots has one winner."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_claim_in_a_child, args=(str(tmp_path / "jobs.db"), f"p{n}", out))
        for n in range(8)
    ]
    for p in procs:
        p.start()
    replies = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    for i in range(50):
        assert sorted(r[i] for r in replies) == ["taken"] * 7 + ["won"]


def test_a_forked_child_uses_its_own_connection(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "jobs.db")
    store.put_schedule("s", json.dumps({"cron": "* * * * *"}))
    ctx = mp.get_context("fork")
    out = ctx.Queue()

    def child() -> None:
        store.put_schedule("t", json.dumps({"cron": "* * * * *"}))
        out.put(sorted(store.schedules()))

    p = ctx.Process(target=child)
    p.start()
    assert out.get(timeout=30) == ["s", "t"]
    p.join(10)
    assert p.exitcode == 0
    assert sorted(store.schedules()) == ["s", "t"]
    assert os.getpid() != p.pid


def test_runners_on_sqlite_poll_every_second_unless_told(tmp_path: Path) -> None:
    """SQLite has no notifications: the runner's default poll is 1 s there (10 s on Redis)."""
    store = SqliteStore(tmp_path / "jobs.db")
    assert store.subscribe() is None
    assert CronRunner(store).poll_interval == 1.0
    assert CronRunner(store, poll_interval=5).poll_interval == 5.0


def test_close_from_one_thread_leaves_every_thread_a_working_store(tmp_path: Path) -> None:
    """close() closes every thread's connection; each thread opens a new one at its next
    use, never the closed one."""
    import threading

    store = SqliteStore(tmp_path / "jobs.db")
    used, go, results = threading.Event(), threading.Event(), []

    def worker() -> None:
        store.ping()
        used.set()
        go.wait(10)
        store.ping()
        results.append(store.schedules())

    thread = threading.Thread(target=worker)
    thread.start()
    assert used.wait(10)
    store.close()
    go.set()
    thread.join(10)
    assert results == [{}]


def test_threads_opening_a_new_file_at_once_all_get_a_working_store(tmp_path: Path) -> None:
    """Six connections meeting a new file at the same instant: each one's switch to WAL
    may find the file busy without SQLite waiting; none fails (20 rounds)."""
    import threading

    for round_ in range(20):
        path = tmp_path / f"jobs{round_}.db"
        errors: list[BaseException] = []
        barrier = threading.Barrier(6)

        def use(
            path: Path = path,
            errors: list[BaseException] = errors,
            barrier: threading.Barrier = barrier,
        ) -> None:
            store = SqliteStore(path)
            barrier.wait(10)
            try:
                store.ping()
                store.schedules()
            except sqlite3.Error as error:
                errors.append(error)

        threads = [threading.Thread(target=use) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert errors == [], (round_, errors)
