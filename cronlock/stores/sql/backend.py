"""What differs between SQL databases, behind one small protocol.

`SqlStore` writes every query once, with ``?`` placeholders and table names from
`Backend.table`; a backend runs them on its database (a PostgreSQL backend turns ``?``
into ``%s``) and supplies the clock leases are measured on, row locks, notifications
and the schema's DDL.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Optional, Protocol

from cronlock.stores.base import Subscription

__all__ = ["Backend", "Cursor"]


class Cursor(Protocol):
    """A DB-API cursor that takes ``?`` placeholders."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Any: ...

    def fetchone(self) -> Optional[Sequence[Any]]: ...

    def fetchall(self) -> list[Sequence[Any]]: ...


class Backend(Protocol):
    """One SQL database: connections, clock, locks, notifications, DDL."""

    #: What a call raises when the database cannot be reached or refuses it.
    errors: tuple[type[BaseException], ...]
    #: ``" FOR UPDATE"`` where rows are locked one by one; ``""`` where a write
    #: transaction already excludes every other writer (SQLite's ``BEGIN IMMEDIATE``).
    lock_rows: str
    #: A column type for an auto-incrementing primary key.
    identity: str

    def table(self, name: str) -> str:
        """The qualified name of cronlock's table ``name`` (e.g. ``"cronlock".jobs``)."""

    def transaction(self) -> AbstractContextManager[Cursor]:
        """A write transaction: committed when the block ends, rolled back on error."""

    def now_ms(self, cursor: Cursor) -> int:
        """The store's clock (epoch ms), read inside the transaction of ``cursor``."""

    def notify(self, cursor: Cursor, payload: str) -> None:
        """Send a wake-up event when the transaction commits (no-op without one)."""

    def subscribe(self) -> Optional[Subscription]:
        """Listen for wake-up events; None when the database has none (poll)."""

    def tables_exist(self, cursor: Cursor) -> bool:
        """Whether cronlock's tables are there (its ``meta`` table, at least); reads only."""

    def create_schema(self, cursor: Cursor, statements: Sequence[str]) -> None:
        """Run the DDL ``statements`` once even when many processes start at once."""

    def location(self) -> str:
        """Where the data lives, for messages (a masked DSN, a file path)."""

    def close(self) -> None:
        """Release every connection this process holds."""
