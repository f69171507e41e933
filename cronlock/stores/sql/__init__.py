"""Shared state in an SQL database: the parts every SQL store shares.

[`SqlStore`][cronlock.stores.sql.SqlStore] implements the whole
[`Store`][cronlock.stores.Store] protocol on a [`Backend`][cronlock.stores.sql.Backend]
(what differs between databases: connections, the clock, row locks, notifications);
`machine` decides claims, renewals, finishes and triggers exactly as the Redis Lua
scripts do, on a job's state held as one JSON row.
"""

from __future__ import annotations

from cronlock.stores.sql.backend import Backend, Cursor
from cronlock.stores.sql.store import SqlStore

__all__ = ["Backend", "Cursor", "SqlStore"]
