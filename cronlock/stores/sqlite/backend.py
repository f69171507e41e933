"""SQLite as a `Backend`: one file, WAL, ``BEGIN IMMEDIATE``, the host's clock.

Every process of one host opens the same file; a write transaction (``BEGIN
IMMEDIATE``) excludes every other writer, so a claim needs no row locks, and a writer
that finds the file busy waits up to ``busy_timeout`` before failing as the store being
unreachable. Leases are measured on the host's clock (every process shares it). Each
thread of each process has its own connection (sqlite3 connections must not cross a
fork or be used by two threads at once).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from cronlock.errors import ConfigurationError
from cronlock.stores.base import Subscription
from cronlock.stores.sql.backend import Cursor

__all__ = ["SqliteBackend"]


def check_path(path: Union[str, os.PathLike[str]]) -> str:
    """The database file's path; refused when it cannot be shared or its directory is absent."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigurationError(f"path must be a file path, got {path!r}")
    text = os.fspath(path)
    if text in ("", ":memory:") or text.startswith("file::memory:"):
        raise ConfigurationError(
            f"path={text!r}: an in-memory SQLite database is private to one connection;"
            " give a file every process can open"
        )
    directory = Path(text).expanduser().resolve().parent
    if not directory.is_dir():
        raise ConfigurationError(f"path={text!r}: directory {str(directory)!r} does not exist")
    return str(Path(text).expanduser())


class SqliteBackend:
    """One SQLite file; see the module docstring."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    lock_rows = ""
    identity = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: Union[str, os.PathLike[str]], busy_timeout: float = 5.0) -> None:
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)):
            raise ConfigurationError(
                f"busy_timeout must be a number of seconds, got {busy_timeout!r}"
            )
        if not 0 < busy_timeout <= 600:
            raise ConfigurationError(
                f"busy_timeout must be in (0, 600] seconds, got {busy_timeout!r}"
            )
        self.path = check_path(path)
        self.busy_timeout = float(busy_timeout)
        self._local = threading.local()
        self._opened: list[tuple[int, sqlite3.Connection]] = []
        self._opened_lock = threading.Lock()

    def table(self, name: str) -> str:
        return f"cronlock_{name}"

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        conn: Optional[sqlite3.Connection] = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == pid:
            return conn
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._use_wal(conn)
            # WAL with synchronous NORMAL: a process killed loses nothing; a power loss may
            # forget the last commits (docs/stores.md)
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
        self._local.conn, self._local.pid = conn, pid
        with self._opened_lock:
            self._opened.append((pid, conn))
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL (once: the mode is kept in the file). Connections that
        open a new file at the same moment meet SQLITE_BUSY here without the busy handler
        being asked (SQLite refuses to wait where waiting could deadlock), so the switch is
        tried again until ``busy_timeout`` has passed."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()
                if mode is None or str(mode[0]).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Cursor]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _SqliteCursor(conn.cursor())
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def now_ms(self, cursor: Cursor) -> int:
        return time.time_ns() // 1_000_000

    def notify(self, cursor: Cursor, payload: str) -> None:
        """SQLite has no notifications: runners poll (``poll_interval``)."""

    def subscribe(self) -> Optional[Subscription]:
        return None

    def tables_exist(self, cursor: Cursor) -> bool:
        cursor.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [self.table("meta")]
        )
        return cursor.fetchone() is not None

    def create_schema(self, cursor: Cursor, statements: Sequence[str]) -> None:
        for statement in statements:  # BEGIN IMMEDIATE already excludes other writers
            cursor.execute(statement)

    def location(self) -> str:
        return f"SQLite file {self.path!r}"

    def close(self) -> None:
        pid = os.getpid()
        with self._opened_lock:
            mine = [conn for owner, conn in self._opened if owner == pid]
            self._opened = [(owner, c) for owner, c in self._opened if owner != pid]
        for conn in mine:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()


class _SqliteCursor:
    """sqlite3's cursor as a `Cursor` (it already takes ``?``)."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cursor.execute(sql, params)

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Any:
        return self._cursor.executemany(sql, params)

    def fetchone(self) -> Optional[Sequence[Any]]:
        row: Optional[Sequence[Any]] = self._cursor.fetchone()
        return row

    def fetchall(self) -> list[Sequence[Any]]:
        return list(self._cursor.fetchall())
