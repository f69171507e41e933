"""The lock contract of ``redis_lock`` on every store (``store_lock``): one holder, fencing
tokens, owner-safe release, expiry, renewal, waiting, loss reported, bad input refused."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cronlock import LockLost, LockNotAcquired
from cronlock.lock import LeaseLock, inspect
from cronlock.lock._poll import MAX_POLL
from cronlock.stores import RedisStore, SqliteStore, SqlStore, Store, store_lock
from cronlock.stores.sql.leases import claim_occurrence, held_locks


def holders(store: Store, key: str) -> list[int]:
    """Fencing tokens of the live holders of ``key``, read from the store itself."""
    if isinstance(store, SqlStore):
        return [info.fencing_token or 0 for info in held_locks(store, key)]
    assert isinstance(store, RedisStore)
    info = inspect(store.client, key, prefix=store.prefix)
    return [] if info is None else [info.fencing_token or 0]


def test_one_holder_and_fences_strictly_increase(store: Store) -> None:
    """A second acquire fails at once; every acquire's token beats the previous one."""
    fences = []
    for _ in range(5):
        with store_lock(store, "billing", ttl=5) as lock:
            assert isinstance(lock, LeaseLock)
            fences.append(lock.fencing_token)
            assert holders(store, "billing") == [lock.fencing_token]
            with pytest.raises(LockNotAcquired) as raised:
                store_lock(store, "billing", ttl=5).acquire()
            assert raised.value.key == "billing"
        assert holders(store, "billing") == []
    assert fences == sorted(set(fences))


def test_expiry_then_takeover_and_the_old_release_frees_nothing(store: Store) -> None:
    """Past its ttl another owner takes the lock with a higher token; the old holder's
    release returns False, reports the loss and leaves the new holder's lease alone."""
    lost: list[LeaseLock] = []
    old = store_lock(store, "export", ttl=0.3, on_lost=lost.append).acquire()
    time.sleep(0.45)
    new = store_lock(store, "export", ttl=5).acquire()
    assert new.fencing_token > old.fencing_token
    assert old.release() is False
    assert lost == [old]
    assert old.lost.is_set()
    assert holders(store, "export") == [new.fencing_token]
    with pytest.raises(LockNotAcquired):
        store_lock(store, "export", ttl=5).acquire()
    assert new.release() is True


def test_a_stranger_releases_nothing(store: Store) -> None:
    """A handle that never held the key (or held it before) cannot free the holder's lease."""
    first = store_lock(store, "k", ttl=5).acquire()
    assert first.release() is True
    holder = store_lock(store, "k", ttl=5).acquire()
    assert first.release() is False  # released already: sends nothing, frees nothing
    assert store_lock(store, "k", ttl=5).release() is False  # never acquired
    assert holders(store, "k") == [holder.fencing_token]


def test_with_exit_raises_lock_lost_after_expiry(store: Store) -> None:
    """A body that outlives an unrenewed lease ends in LockLost, with check() raising too."""
    lock = store_lock(store, "slow", ttl=0.2)

    def body() -> None:
        with lock:
            time.sleep(0.3)
            with pytest.raises(LockLost):
                lock.check()
            store_lock(store, "slow", ttl=5).acquire()  # someone else takes it meanwhile

    with pytest.raises(LockLost):
        body()
    assert lock.lost.is_set()


@pytest.mark.slow
def test_renewal_keeps_the_lock_past_its_ttl(store: Store) -> None:
    """renew=True holds the lock for over two ttls: nobody else gets it, no loss reported.

    A 1 s ttl (renewed every 0.33 s): shorter leases lapse when a loaded machine delays
    the renewal thread."""
    with store_lock(store, "long", ttl=1.0, renew=True) as lock:
        deadline = time.monotonic() + 2.3
        while time.monotonic() < deadline:
            with pytest.raises(LockNotAcquired):
                store_lock(store, "long", ttl=5).acquire()
            time.sleep(0.1)
        assert lock.held
        assert not lock.lost.is_set()
        assert lock.remaining() > 0
    assert holders(store, "long") == []


def test_waiting_acquires_after_the_release(store: Store) -> None:
    """A waiter gets the lock once the holder releases, within the wake-up bound."""
    holder = store_lock(store, "queue", ttl=10).acquire()
    released = []

    def release_later() -> None:
        time.sleep(0.3)
        released.append(time.monotonic())
        holder.release()

    thread = threading.Thread(target=release_later)
    thread.start()
    try:
        with store_lock(store, "queue", ttl=5, wait=5) as waiter:
            got = time.monotonic()
            assert waiter.fencing_token > holder.fencing_token
    finally:
        thread.join()
    assert len(released) == 1
    assert released[0] <= got < released[0] + MAX_POLL + 0.5  # slack: a loaded machine


def test_a_wait_that_runs_out_raises(store: Store) -> None:
    """wait=0.3 on a held lock gives up after about 0.3 s with LockNotAcquired."""
    with store_lock(store, "busy", ttl=10):
        start = time.monotonic()
        with pytest.raises(LockNotAcquired, match=r"within 0\.3 s"):
            store_lock(store, "busy", ttl=5, wait=0.3).acquire()
        assert 0.25 <= time.monotonic() - start < 2.0


def test_a_waiter_takes_a_lease_nobody_released(store: Store) -> None:
    """A waiter gets a lock whose holder never released once its lease runs out."""
    dead = store_lock(store, "orphan", ttl=0.4).acquire()
    start = time.monotonic()
    with store_lock(store, "orphan", ttl=5, wait=5) as lock:
        assert 0.25 <= time.monotonic() - start < 2.0
        assert lock.fencing_token > dead.fencing_token


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        (("", 5), {}, "''"),
        (("a{b}", 5), {}, "a{b}"),
        (("k", -1), {}, "-1"),
        (("k", "ten"), {}, "ten"),
        (("k", 5), {"wait": -2}, "-2"),
        (("k", 5), {"renew": "yes"}, "yes"),
        (("k", 5), {"max_hold": 0}, "max_hold"),
        (("k", 5), {"on_lost": 3}, "3"),
    ],
)
def test_bad_input_is_refused_naming_it(
    store: Store, args: tuple[Any, ...], kwargs: dict[str, Any], named: str
) -> None:
    """Each bad argument is a ValueError/TypeError naming the value; nothing is held after."""
    with pytest.raises((ValueError, TypeError), match=re.escape(named)):
        store_lock(store, *args, **kwargs)
    assert holders(store, "k") == []


def test_something_that_is_not_a_store_is_refused() -> None:
    """store_lock names what it was given when it is neither a store nor a client."""
    with pytest.raises(TypeError, match="'postgresql://x'"):
        store_lock("postgresql://x", "k", 5)


def test_a_busy_sqlite_file_fails_closed(tmp_path: Path) -> None:
    """SQLite held by another writer past busy_timeout: the acquire raises sqlite3's
    error and nothing is held; once free, the lock is acquired normally."""
    store = SqliteStore(tmp_path / "busy.db", busy_timeout=0.2)
    with store_lock(store, "k", ttl=5):
        pass  # creates the tables
    other = sqlite3.connect(tmp_path / "busy.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        lock = store_lock(store, "k", ttl=5)
        with pytest.raises(sqlite3.OperationalError):
            lock.acquire()
        assert not lock.held
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert holders(store, "k") == []
    with store_lock(store, "k", ttl=5) as lock:
        assert lock.held
    store.close()


def test_exec_slot_claims_each_occurrence_once_on_sql(store: Store) -> None:
    """``exec --slot``'s claim on an SQL store: only the lock's holder claims, each
    occurrence once, never an older one (the Redis script has its own test)."""
    if not isinstance(store, SqlStore):
        pytest.skip("Redis's claim is exec_slot_claim.lua (test_cli_exec_slot.py)")
    t = 1_700_000_040_000
    with store_lock(store, "cron-line", ttl=10) as lock:

        def claim(ms: int, token: str = lock.token) -> tuple[str, str]:
            return claim_occurrence(store, "cron-line", token, ms)

        assert claim(t) == ("claimed", "")
        assert claim(t) == ("done", str(t))
        assert claim(t - 60_000) == ("stale", str(t))
        assert claim(t + 60_000) == ("claimed", str(t))
        assert claim(t + 120_000, "not-the-token") == ("lost", "")
    assert claim_occurrence(store, "cron-line", lock.token, t + 120_000) == ("lost", "")
    with store_lock(store, "cron-line", ttl=10) as again:  # the record outlives the lock
        assert claim_occurrence(store, "cron-line", again.token, t + 60_000) == (
            "done",
            str(t + 60_000),
        )
