"""`SqlStore`: the whole [`Store`][cronlock.stores.Store] on an SQL database.

The claim path and the runner's operations are `SqlClaimPath`'s; this adds what
[`Admin`][cronlock.admin.Admin], the CLI and the dashboard read and write: the registry,
job states, history, heartbeats, pause flags, manual-run requests and dynamic schedules.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Optional

from cronlock.stores.entries import entry_from_fields
from cronlock.stores.sql import schema
from cronlock.stores.sql.backend import Cursor
from cronlock.stores.sql.claimpath import SqlClaimPath
from cronlock.stores.sql.rows import decode_state, placeholders
from cronlock.stores.types import HistoryEntry, JobState

__all__ = ["SqlStore"]


class SqlStore(SqlClaimPath):
    """Shared state of one prefix in an SQL database.

    Args:
        backend: the database (`SqliteStore` and `PostgresStore` build theirs).
        prefix: namespace of every row; replicas of one app must share it.
        create_schema: create the tables when absent (idempotent, safe when many
            processes start at once); False refuses with a clear error instead.
    """

    # -- reading -------------------------------------------------------------------------

    def schema_version(self) -> Optional[str]:
        """The schema version the database's tables carry; None when they are absent.

        Reads only, whatever ``create_schema`` says: ``cronlock store check`` compares it
        with `cronlock.stores.sql.schema.SCHEMA_VERSION` (what this code writes).
        """
        with self.backend.transaction() as cur:
            if not self.backend.tables_exist(cur):
                return None
            return schema.read_version(self.backend, cur)

    def _pairs(self, sql: str, params: Sequence[object]) -> dict[str, str]:
        with self._tx() as cur:
            cur.execute(sql, params)
            return {str(k): str(v) for k, v in cur.fetchall()}

    def schedules(self) -> dict[str, str]:
        return self._pairs(
            f"SELECT id, spec FROM {self._t('schedules')} WHERE prefix = ?", [self.prefix]
        )

    def registry(self) -> dict[str, str]:
        return self._pairs(
            f"SELECT key, entry FROM {self._t('registry')} WHERE prefix = ?", [self.prefix]
        )

    def registry_entry(self, key: str) -> Optional[str]:
        return self.registry_entries([key]).get(key)

    def registry_entries(self, keys: Sequence[str]) -> dict[str, str]:
        if not keys:
            return {}
        return self._pairs(
            f"SELECT key, entry FROM {self._t('registry')} WHERE prefix = ?"
            f" AND key IN ({placeholders(keys)})",
            [self.prefix, *keys],
        )

    def job_states(self, keys: Sequence[str]) -> list[JobState]:
        if not keys:
            return []
        states = self._pairs(
            f"SELECT key, state FROM {self._t('jobs')} WHERE prefix = ?"
            f" AND key IN ({placeholders(keys)})",
            [self.prefix, *keys],
        )
        pending = self._pairs(
            f"SELECT key, COUNT(*) FROM {self._t('triggers')} WHERE prefix = ?"
            f" AND key IN ({placeholders(keys)}) GROUP BY key",
            [self.prefix, *keys],
        )
        return [
            JobState(decode_state(states.get(key)) or {}, int(pending.get(key, 0))) for key in keys
        ]

    def history(self, key: str, limit: int) -> list[HistoryEntry]:
        with self._tx() as cur:
            cur.execute(
                f"SELECT id, at_ms, fields FROM {self._t('history')} WHERE prefix = ? AND key = ?"
                " ORDER BY id DESC LIMIT ?",
                [self.prefix, key, limit],
            )
            rows = cur.fetchall()
        return [
            entry_from_fields(key, f"{at}-{row_id}", int(at), json.loads(str(fields)))
            for row_id, at, fields in rows
        ]

    def heartbeats(self) -> list[tuple[str, Optional[float]]]:
        with self._tx() as cur:
            now = self.backend.now_ms(cur)
            cur.execute(
                f"SELECT value, expires_ms FROM {self._t('runners')}"
                " WHERE prefix = ? AND expires_ms > ? ORDER BY runner",
                [self.prefix, now],
            )
            return [(str(value), (int(until) - now) / 1000) for value, until in cur.fetchall()]

    def schedule_count(self) -> int:
        return len(self.schedules())

    def pause_all_active(self) -> bool:
        with self._tx() as cur:
            return self._flag(cur, "pause_all") is not None

    # -- writing -------------------------------------------------------------------------

    def register_jobs(self, entries: Mapping[str, str]) -> list[str]:
        if not entries:
            return []
        keys = sorted(entries)
        t = self._t("registry")
        with self._tx() as cur:
            cur.execute(
                f"SELECT key FROM {t} WHERE prefix = ? AND key IN ({placeholders(keys)})",
                [self.prefix, *keys],
            )
            known = {str(row[0]) for row in cur.fetchall()}
            cur.executemany(
                f"INSERT INTO {t} (prefix, key, entry) VALUES (?, ?, ?)"
                " ON CONFLICT (prefix, key) DO UPDATE SET entry = excluded.entry",
                [(self.prefix, key, entries[key]) for key in keys],
            )
            new = [key for key in keys if key not in known]
            if new and self._flag(cur, "pause_all") is not None:
                self._set_paused(cur, new, True)
        return new

    def _set_paused(self, cur: Cursor, keys: Sequence[str], paused: bool) -> None:
        keys = sorted(set(keys))
        if not keys:
            return
        raw = self._lock_states(cur, keys)
        states = {}
        for key in keys:
            state = decode_state(raw[key])
            if state is None:
                continue  # not cronlock's row: left alone, as a claim leaves it
            if paused:
                state["paused"] = "1"
            else:
                state.pop("paused", None)
            states[key] = state
        self._write_states(cur, states, raw)

    def pause(self, key: str) -> None:
        with self._tx() as cur:
            self._set_paused(cur, [key], True)

    def resume(self, key: str) -> None:
        with self._tx() as cur:
            self._set_paused(cur, [key], False)

    def pause_all(self, keys: Sequence[str]) -> None:
        with self._tx() as cur:
            self._put_flag(cur, "pause_all", "1")
            self._set_paused(cur, keys, True)

    def resume_all(self, keys: Sequence[str]) -> None:
        with self._tx() as cur:
            cur.execute(
                f"DELETE FROM {self._t('flags')} WHERE prefix = ? AND name = 'pause_all'",
                [self.prefix],
            )
            self._set_paused(cur, keys, False)

    def _put_flag(self, cur: Cursor, name: str, value: str) -> None:
        cur.execute(
            f"INSERT INTO {self._t('flags')} (prefix, name, value) VALUES (?, ?, ?)"
            " ON CONFLICT (prefix, name) DO UPDATE SET value = excluded.value",
            [self.prefix, name, value],
        )

    def forget(self, key: str) -> bool:
        found = False
        with self._tx() as cur:
            for table in ("registry", "jobs", "history", "triggers", "pending"):
                cur.execute(
                    f"DELETE FROM {self._t(table)} WHERE prefix = ? AND key = ?", [self.prefix, key]
                )
                found = found or cur.rowcount > 0
        self._rows.discard(key)
        return found

    def queue_trigger(self, key: str, request: str, max_pending: int) -> None:
        t = self._t("triggers")
        with self._tx() as cur:
            cur.execute(
                f"INSERT INTO {t} (prefix, key, request) VALUES (?, ?, ?)",
                [self.prefix, key, request],
            )
            cur.execute(
                f"DELETE FROM {t} WHERE prefix = ? AND key = ? AND id NOT IN (SELECT id FROM {t}"
                " WHERE prefix = ? AND key = ? ORDER BY id DESC LIMIT ?)",
                [self.prefix, key, self.prefix, key, max_pending],
            )
            cur.execute(
                f"INSERT INTO {self._t('pending')} (prefix, key) VALUES (?, ?)"
                " ON CONFLICT (prefix, key) DO NOTHING",
                [self.prefix, key],
            )
            self.backend.notify(cur, json.dumps({"type": "trigger", "key": key}))

    def put_schedule(self, schedule_id: str, spec: str) -> None:
        with self._tx() as cur:
            cur.execute(
                f"INSERT INTO {self._t('schedules')} (prefix, id, spec) VALUES (?, ?, ?)"
                " ON CONFLICT (prefix, id) DO UPDATE SET spec = excluded.spec",
                [self.prefix, schedule_id, spec],
            )
            self._bump_schedules(cur)

    def remove_schedule(self, schedule_id: str) -> bool:
        with self._tx() as cur:
            cur.execute(
                f"DELETE FROM {self._t('schedules')} WHERE prefix = ? AND id = ?",
                [self.prefix, schedule_id],
            )
            existed = cur.rowcount > 0
            self._bump_schedules(cur)
        return existed

    def _bump_schedules(self, cur: Cursor) -> None:
        # a fresh token, not a counter: two changes committed at once still differ
        self._put_flag(cur, "schedules_version", uuid.uuid4().hex)
        self.backend.notify(cur, json.dumps({"type": "schedules"}))
