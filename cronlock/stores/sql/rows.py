"""Rows as the SQL stores write them: a job's state as JSON, history appended and capped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Optional

from cronlock.stores.sql.backend import Backend, Cursor
from cronlock.stores.types import Retention

__all__ = ["History", "decode_state", "placeholders"]


def placeholders(values: Sequence[object]) -> str:
    """``?, ?, ?`` for an ``IN (...)`` of ``values``."""
    return ", ".join("?" * len(values))


def decode_state(raw: Optional[str]) -> Optional[dict[str, str]]:
    """A state row's JSON as field -> value; ``{}`` for a row not yet written, None for
    one that is not an object of strings (not written by cronlock: left alone)."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return None
    return value


class History:
    """History entries of one transaction, appended at ``now`` and capped as on Redis:
    at most ``max_entries`` per job, none older than ``max_age_ms``."""

    def __init__(self, backend: Backend, prefix: str, now: int) -> None:
        self._table = backend.table("history")
        self._prefix = prefix
        self._now = now
        self._rows: list[tuple[str, str, int, str]] = []
        self._caps: dict[str, Retention] = {}

    def add(self, key: str, events: Sequence[dict[str, str]], retention: Retention) -> None:
        if not events or retention.max_entries <= 0:
            return
        for event in events:
            fields = json.dumps(event, separators=(",", ":"))
            self._rows.append((self._prefix, key, self._now, fields))
        self._caps[key] = retention

    def write(self, cur: Cursor) -> None:
        if not self._rows:
            return
        t = self._table
        cur.executemany(
            f"INSERT INTO {t} (prefix, key, at_ms, fields) VALUES (?, ?, ?, ?)", self._rows
        )
        for key, kept in sorted(self._caps.items()):
            cur.execute(
                f"DELETE FROM {t} WHERE prefix = ? AND key = ? AND id <= (SELECT id FROM {t}"
                " WHERE prefix = ? AND key = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                [self._prefix, key, self._prefix, key, kept.max_entries],
            )
            if kept.max_age_ms > 0:
                cur.execute(
                    f"DELETE FROM {t} WHERE prefix = ? AND key = ? AND at_ms < ?",
                    [self._prefix, key, self._now - kept.max_age_ms],
                )
        self._rows.clear()
        self._caps.clear()
