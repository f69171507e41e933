"""`SqlStore.schema_version`: what the tables say, read without creating anything."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cronlock.stores import SqliteStore
from cronlock.stores.sql.schema import SCHEMA_VERSION


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return sorted(str(name) for (name,) in rows)


def test_no_tables_is_none_and_asking_creates_none(tmp_path: Path) -> None:
    """On a new file the version is None, and asking for it leaves the file without tables
    (even on a store that would create them on first use)."""
    path = tmp_path / "jobs.db"
    assert SqliteStore(path).schema_version() is None
    assert tables(path) == []


def test_the_version_the_tables_carry(tmp_path: Path) -> None:
    """After first use the version is this code's; another value in the row is returned as
    it is, and a meta table without the row reads as None."""
    path = tmp_path / "jobs.db"
    store = SqliteStore(path)
    store.schedules()  # first use creates the tables
    assert "cronlock_meta" in tables(path)
    assert store.schema_version() == str(SCHEMA_VERSION)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE cronlock_meta SET value = '99' WHERE name = 'schema_version'")
    assert store.schema_version() == "99"
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM cronlock_meta")
    assert SqliteStore(path, create_schema=False).schema_version() is None
