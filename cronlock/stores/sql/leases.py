"""Lock leases in an SQL store: the `Leases` of a lock on SQLite or PostgreSQL.

One row per lock key in the ``locks`` table: ``owner`` (the holder's random token, ``''``
when free), ``expires_ms`` (the lease's end on the store's clock), ``fence`` (the last
fencing token), ``holder`` (``host:pid``) and ``since_ms``. A release empties ``owner``
and keeps the row, so the next fencing token is ``max(last + 1, now in microseconds)``:
strictly increasing per key for as long as the row exists, and still increasing by the
clock if an operator deletes it (the same rule as Redis, whose tokens are of the same
magnitude, so tokens keep increasing when a fleet moves from Redis to SQL). The cost:
one small row per key ever locked.

Every step is one transaction that locks the key's row and reads the store's clock
(PostgreSQL ``clock_timestamp()``, SQLite the host's), decides as the Redis scripts do,
and writes: a step costs two round trips on PostgreSQL (three for a key's first acquire,
which inserts its row), one file transaction on SQLite.
A waiter polls (`cronlock.lock._poll`): SQL stores have no wake-up for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from cronlock._validate import check_key
from cronlock.clock import monotonic
from cronlock.errors import LockNotAcquired
from cronlock.lock import LockInfo
from cronlock.lock._lease import holder_name
from cronlock.lock._poll import poll_acquire
from cronlock.stores.sql.backend import Cursor
from cronlock.stores.sql.claimpath import SqlClaimPath

__all__ = ["SqlLeases", "claim_occurrence", "held_locks"]

#: How many held locks `held_locks` lists at most.
LIST_LIMIT = 10_000


@dataclass(frozen=True)
class _Row:
    owner: str
    expires_ms: int
    fence: int


class SqlLeases:
    """One lock key's leases in an SQL store (see the module docstring)."""

    client: Any = None  # connections are per process and thread: nothing to hold at fork

    def __init__(self, store: SqlClaimPath, key: str) -> None:
        self.key = check_key(key)
        self.prefix = store.prefix
        self.errors = store.errors
        self._store = store
        self.server = store  # one renewal thread per store (its database), not per lock
        self._backend = store.backend
        self._table = store.backend.table("locks")

    def _locked_row(self, cur: Cursor) -> tuple[Optional[_Row], int]:
        """The key's row, locked, and the store's clock read once the lock is held."""
        cur.execute(
            f"SELECT owner, expires_ms, fence FROM {self._table}"
            f" WHERE prefix = ? AND key = ?{self._backend.lock_rows}",
            [self.prefix, self.key],
        )
        found = cur.fetchone()
        now = self._backend.now_ms(cur)
        if found is None:
            return None, now
        return _Row(str(found[0]), int(found[1]), int(found[2])), now

    def try_acquire(self, token: str, ttl_ms: int) -> tuple[Optional[int], int]:
        """One try: (fencing token, 0) when won, else (None, the holder's lease left in ms)."""
        self._store.ensure_schema()
        with self._backend.transaction() as cur:
            row, now = self._locked_row(cur)
            if row is not None and row.owner and row.expires_ms > now:
                return None, row.expires_ms - now
            fence = max(0 if row is None else row.fence + 1, now * 1000)
            values = [token, now + ttl_ms, fence, holder_name(), now]
            if row is not None:
                cur.execute(
                    f"UPDATE {self._table} SET owner = ?, expires_ms = ?, fence = ?, holder = ?,"
                    " since_ms = ? WHERE prefix = ? AND key = ?",
                    [*values, self.prefix, self.key],
                )
                return fence, 0
            cur.execute(
                f"INSERT INTO {self._table} (owner, expires_ms, fence, holder, since_ms,"
                " prefix, key) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (prefix, key) DO NOTHING",
                [*values, self.prefix, self.key],
            )
            if cur.rowcount == 1:
                return fence, 0
            return None, ttl_ms  # another process created the row (and took the lock) first

    def acquire(self, token: str, ttl_ms: int, wait_ms: Optional[int]) -> tuple[int, float]:
        if wait_ms:
            return poll_acquire(
                lambda: self.try_acquire(token, ttl_ms), wait_ms=wait_ms, name=self.key
            )
        sent = monotonic()
        fence, _ = self.try_acquire(token, ttl_ms)
        if fence is None:
            raise LockNotAcquired(self.key)
        return fence, sent

    def _if_owned(self, token: str, assignments: str, ttl_ms: int) -> bool:
        """Set ``assignments`` (one ``?``: the clock + ``ttl_ms``) while ``token`` holds a
        live lease; whether it did."""
        self._store.ensure_schema()
        with self._backend.transaction() as cur:
            row, now = self._locked_row(cur)
            if row is None or row.owner != token or row.expires_ms <= now:
                return False
            cur.execute(
                f"UPDATE {self._table} SET {assignments} WHERE prefix = ? AND key = ?",
                [now + ttl_ms, self.prefix, self.key],
            )
            return True

    def extend(self, token: str, ttl_ms: int) -> bool:
        return self._if_owned(token, "expires_ms = ?", ttl_ms)

    def release(self, token: str) -> bool:
        # owner emptied, the fence kept: the next holder's token is higher
        return self._if_owned(token, "owner = '', expires_ms = ?", 0)


def claim_occurrence(
    store: SqlClaimPath, key: str, token: str, occurrence_ms: int
) -> tuple[str, str]:
    """``cronlock exec --slot`` on an SQL store: claim one occurrence under the lock.

    The words of ``exec_slot_claim.lua``: ``("claimed", previous or "")``, ``("done",
    stored)``, ``("stale", stored)`` for a later one claimed, ``("lost", "")`` when
    ``token`` does not hold the lock. The latest claimed occurrence is the ``slot_ms``
    column of the lock's row, kept with the row; only ``claimed`` writes.
    """
    leases = SqlLeases(store, key)
    store.ensure_schema()
    backend = store.backend
    table = backend.table("locks")
    with backend.transaction() as cur:
        cur.execute(
            f"SELECT owner, expires_ms, slot_ms FROM {table}"
            f" WHERE prefix = ? AND key = ?{backend.lock_rows}",
            [leases.prefix, leases.key],
        )
        row = cur.fetchone()
        now = backend.now_ms(cur)
        if row is None or str(row[0]) != token or int(row[1]) <= now:
            return "lost", ""
        stored = None if row[2] is None else int(row[2])
        if stored is not None and stored >= occurrence_ms:
            return ("done" if stored == occurrence_ms else "stale"), str(stored)
        cur.execute(
            f"UPDATE {table} SET slot_ms = ? WHERE prefix = ? AND key = ?",
            [occurrence_ms, leases.prefix, leases.key],
        )
        return "claimed", "" if stored is None else str(stored)


def held_locks(store: SqlClaimPath, key: Optional[str] = None) -> list[LockInfo]:
    """The locks held now under the store's prefix (or lock ``key`` alone), by key.

    Reads only; at most `LIST_LIMIT`. ``since`` is the store's clock at the acquire.
    """
    if key is not None:
        check_key(key)
    store.ensure_schema()
    backend = store.backend
    where = "" if key is None else " AND key = ?"
    with backend.transaction() as cur:
        now = backend.now_ms(cur)
        cur.execute(
            f"SELECT key, owner, expires_ms, fence, holder, since_ms FROM {backend.table('locks')}"
            f" WHERE prefix = ? AND owner <> '' AND expires_ms > ?{where} ORDER BY key LIMIT ?",
            [store.prefix, now, *([] if key is None else [key]), LIST_LIMIT],
        )
        rows = cur.fetchall()
    return [
        LockInfo(
            key=str(name),
            token=str(owner),
            holder=str(holder) or None,
            since=datetime.fromtimestamp(int(since) / 1000, tz=timezone.utc),
            ttl_remaining=(int(expires) - now) / 1000,
            fencing_token=int(fence),
        )
        for name, owner, expires, fence, holder, since in rows
    ]
