"""`SqliteStore`: shared state in one SQLite file, for the processes of one host."""

from __future__ import annotations

from cronlock.stores.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
