"""The claim path and the runner's operations of `SqlStore`, on an SQL `Backend`.

Every decision (claim, renew, finish, trigger) is one transaction that locks the job's
row, reads the store's clock, lets `machine` decide as the Lua scripts do, and writes the
row and its history back; a claim of many slots is one transaction for all of them.
Rows are locked in key order, so two replicas' batches never wait on each other in a
cycle. The operator side is `cronlock.stores.sql.store`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional, Union

from cronlock._validate import check_prefix
from cronlock.errors import ConfigurationError
from cronlock.stores.base import Subscription
from cronlock.stores.sql import machine, schema
from cronlock.stores.sql.backend import Backend, Cursor
from cronlock.stores.sql.rows import History, decode_state, placeholders
from cronlock.stores.types import (
    ClaimReply,
    ClaimStatus,
    FinishInfo,
    Heartbeat,
    Replication,
    Retention,
    SlotClaim,
    SyncReply,
    TriggerClaim,
    TriggerReply,
    TriggerStatus,
)

__all__ = ["SqlClaimPath"]


@dataclass
class _Locked:
    """A job's locked row: its state (None if it is not cronlock's JSON), the store's
    clock, and the history entries to append."""

    cur: Cursor
    now: int
    state: Optional[machine.State]
    history: History


class SqlClaimPath:
    """What the runner needs of an SQL store (see the module docstring).

    Args:
        backend: the database (`SqliteStore` and `PostgresStore` build theirs).
        prefix: namespace of every row; replicas of one app must share it.
        create_schema: create the tables when absent (idempotent, safe when many
            processes start at once); False refuses with a clear error instead.
    """

    def __init__(self, backend: Backend, prefix: str = "cronlock", *, create_schema: bool = True):
        self.backend = backend
        self.prefix = check_prefix(prefix)
        self.errors: tuple[type[BaseException], ...] = backend.errors
        self._create_schema = create_schema
        self._ready_pid = 0
        self._ready_lock = threading.Lock()
        self._rows: set[str] = set()  # job keys whose state row is known to exist
        self._t = backend.table

    # -- transactions --------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create (or, with ``create_schema=False``, check) the tables; once per process."""
        if self._ready_pid == os.getpid():
            return
        with self._ready_lock:
            if self._ready_pid == os.getpid():
                return
            with self.backend.transaction() as cur:
                if self._create_schema:
                    self.backend.create_schema(cur, schema.statements(self.backend))
                elif not self.backend.tables_exist(cur):
                    # refused, not raised as the database's error: the runner would
                    # retry that as an outage for ever
                    raise schema.SchemaError(
                        f"cronlock's tables are absent from {self.backend.location()} and"
                        " create_schema=False: create them first (`cronlock store init`,"
                        " or a store with create_schema=True)"
                    )
                schema.check_version(self.backend, cur)
            self._ready_pid = os.getpid()

    @contextmanager
    def _tx(self) -> Iterator[Cursor]:
        self.ensure_schema()
        with self.backend.transaction() as cur:
            yield cur

    def _lock_states(self, cur: Cursor, keys: Sequence[str]) -> dict[str, Optional[str]]:
        """Lock the state rows of ``keys`` (sorted), creating absent ones; key -> JSON.
        A row deleted meanwhile (``forget``) maps to None and is inserted on write."""
        t = self._t("jobs")
        unknown = [k for k in keys if k not in self._rows]
        if unknown:
            cur.executemany(
                f"INSERT INTO {t} (prefix, key, state) VALUES (?, ?, '{{}}')"
                " ON CONFLICT (prefix, key) DO NOTHING",
                [(self.prefix, k) for k in unknown],
            )
        cur.execute(
            f"SELECT key, state FROM {t} WHERE prefix = ? AND key IN ({placeholders(keys)})"
            f" ORDER BY key{self.backend.lock_rows}",
            [self.prefix, *keys],
        )
        found: dict[str, Optional[str]] = dict.fromkeys(keys)
        found.update({str(k): str(v) for k, v in cur.fetchall()})
        self._rows.update(k for k, v in found.items() if v is not None)
        return found

    def _write_states(
        self, cur: Cursor, states: dict[str, machine.State], raw: dict[str, Optional[str]]
    ) -> None:
        t = self._t("jobs")
        updates, inserts = [], []
        for key, state in states.items():
            value = json.dumps(state, separators=(",", ":"), sort_keys=True)
            if raw[key] is None:
                inserts.append((self.prefix, key, value))
            elif value != raw[key]:
                updates.append((value, self.prefix, key))
        if updates:
            cur.executemany(f"UPDATE {t} SET state = ? WHERE prefix = ? AND key = ?", updates)
        if inserts:
            cur.executemany(f"INSERT INTO {t} (prefix, key, state) VALUES (?, ?, ?)", inserts)

    # -- the claim path ------------------------------------------------------------------

    def check_replication(self, replicas: int, timeout_ms: int) -> Optional[Replication]:
        if replicas:
            raise ConfigurationError(
                f"wait_replicas={replicas} is a Redis option; a database's own replication"
                " settings (e.g. PostgreSQL synchronous_commit) decide what a commit waits for"
            )
        return None

    def read_claims(self, claims: Sequence[SlotClaim]) -> list[Optional[ClaimReply]]:
        """None for each: a claim here is one statement already, and a losing claim
        writes nothing."""
        return [None] * len(claims)

    def claim_slots(
        self, claims: Sequence[SlotClaim], replication: Optional[Replication] = None
    ) -> list[Union[ClaimReply, BaseException]]:
        if not claims:
            return []
        keys = sorted({c.key for c in claims})
        with self._tx() as cur:
            raw = self._lock_states(cur, keys)
            now = self.backend.now_ms(cur)
            history = History(self.backend, self.prefix, now)
            states: dict[str, machine.State] = {}
            replies: list[Union[ClaimReply, BaseException]] = []
            for c in claims:
                state = states.get(c.key)
                if state is None:
                    state = decode_state(raw[c.key])
                    if state is None:
                        replies.append(ClaimReply(ClaimStatus.CORRUPT, detail="state"))
                        continue
                    states[c.key] = state
                step = machine.Step()
                replies.append(machine.claim(state, now, c, step))
                history.add(c.key, step.events, c.retention)
            self._write_states(cur, states, raw)
            history.write(cur)
        return replies

    def state_location(self, key: str) -> str:
        return (
            f"row (prefix={self.prefix!r}, key={key!r}) of {self._t('jobs')}"
            f" in {self.backend.location()}"
        )

    @contextmanager
    def _decide(self, key: str) -> Iterator[_Locked]:
        """One job's row locked in a transaction; written back (with its history) when
        the block ends without an error."""
        with self._tx() as cur:
            raw = self._lock_states(cur, [key])
            now = self.backend.now_ms(cur)
            locked = _Locked(
                cur, now, decode_state(raw[key]), History(self.backend, self.prefix, now)
            )
            yield locked
            if locked.state is not None:
                self._write_states(cur, {key: locked.state}, raw)
                locked.history.write(cur)

    def renew(self, key: str, slot_ms: int, owner: str, lease_ms: int) -> Optional[int]:
        with self._decide(key) as d:
            return (
                None if d.state is None else machine.renew(d.state, d.now, slot_ms, owner, lease_ms)
            )

    def finish(
        self,
        key: str,
        slot_ms: int,
        owner: str,
        outcome: str,
        *,
        retention: Retention,
        info: FinishInfo,
        replication: Optional[Replication] = None,  # refused by check_replication: ignored
    ) -> bool:
        with self._decide(key) as d:
            if d.state is None:
                return False
            step = machine.Step()
            history = retention.max_entries > 0
            ok = machine.finish(
                d.state, d.now, slot_ms, owner, outcome, info=info, step=step, history=history
            )
            d.history.add(key, step.events, retention)
            return ok

    def take_trigger(self, claim: TriggerClaim) -> TriggerReply:
        with self._decide(claim.key) as d:
            if d.state is None:
                return TriggerReply(TriggerStatus.CORRUPT, trigger_id="state")
            t = self._t("triggers")
            d.cur.execute(
                f"SELECT id, request FROM {t} WHERE prefix = ? AND key = ? ORDER BY id LIMIT 1",
                [self.prefix, claim.key],
            )
            row = d.cur.fetchone()
            if row is not None:
                d.cur.execute(f"DELETE FROM {t} WHERE id = ?", [row[0]])
            step = machine.Step()
            reply = machine.trigger(
                d.state, d.now, None if row is None else str(row[1]), claim, step
            )
            d.history.add(claim.key, step.events, claim.retention)
            return reply

    # -- operations ----------------------------------------------------------------------

    def sync(self, heartbeat: Optional[Heartbeat]) -> SyncReply:
        with self._tx() as cur:
            cur.execute(f"SELECT key FROM {self._t('pending')} WHERE prefix = ?", [self.prefix])
            pending = frozenset(str(row[0]) for row in cur.fetchall())
            version = self._flag(cur, "schedules_version")
            if heartbeat is not None:
                now = self.backend.now_ms(cur)
                runners = self._t("runners")
                cur.execute(
                    f"INSERT INTO {runners} (prefix, runner, value, expires_ms) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (prefix, runner) DO UPDATE SET value = excluded.value,"
                    " expires_ms = excluded.expires_ms",
                    [
                        self.prefix,
                        heartbeat.runner_id,
                        heartbeat.value,
                        now + heartbeat.ttl_s * 1000,
                    ],
                )
                cur.execute(
                    f"DELETE FROM {runners} WHERE prefix = ? AND expires_ms <= ?",
                    [self.prefix, now],
                )
        return SyncReply(pending_triggers=pending, schedules_version=version)

    def _flag(self, cur: Cursor, name: str) -> Optional[str]:
        cur.execute(
            f"SELECT value FROM {self._t('flags')} WHERE prefix = ? AND name = ?",
            [self.prefix, name],
        )
        row = cur.fetchone()
        return None if row is None else str(row[0])

    def clear_triggers(self, keys: Sequence[str]) -> None:
        if keys:
            with self._tx() as cur:
                cur.execute(
                    f"DELETE FROM {self._t('pending')} WHERE prefix = ?"
                    f" AND key IN ({placeholders(keys)})",
                    [self.prefix, *keys],
                )

    def schedules_version(self) -> Optional[str]:
        with self._tx() as cur:
            return self._flag(cur, "schedules_version")

    def delete_heartbeat(self, runner_id: str) -> None:
        with self._tx() as cur:
            cur.execute(
                f"DELETE FROM {self._t('runners')} WHERE prefix = ? AND runner = ?",
                [self.prefix, runner_id],
            )

    def publish(self, event: Any) -> None:
        with self._tx() as cur:
            self.backend.notify(cur, json.dumps(dict(event)))

    def subscribe(self) -> Optional[Subscription]:
        return self.backend.subscribe()

    def ping(self) -> None:
        with self.backend.transaction() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()

    def time_ms(self) -> int:
        with self.backend.transaction() as cur:
            return self.backend.now_ms(cur)

    def close(self) -> None:
        """Release this process's connections (the store reconnects when used again)."""
        self.backend.close()
