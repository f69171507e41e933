"""`SqlStore.schema_version`: what the tables say, read without creating anything, on
SQLite (a file) and PostgreSQL (a schema of the test's own on the private server)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from cronlock.stores import SqlStore, from_url
from cronlock.stores.sql.schema import SCHEMA_VERSION


class Database:
    """One empty SQL database for a test: stores on it, raw SQL, and what tables it has."""

    def __init__(self, url: str, execute: Callable[[str], None], tables: Callable[[], list[str]]):
        self.url, self.execute, self.tables = url, execute, tables
        self.stores: list[SqlStore] = []

    def store(self, **options: Any) -> SqlStore:
        made = from_url(self.url, prefix="p", **options)
        assert isinstance(made, SqlStore)
        self.stores.append(made)
        return made


def sqlite_database(path: Path) -> Database:
    def execute(sql: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(sql)

    def tables() -> list[str]:
        if not path.exists():
            return []
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return sorted(str(name) for (name,) in rows)

    return Database(f"sqlite:///{path}", execute, tables)


def postgres_database(pg_server: Any, schema: str) -> Database:
    def execute(sql: str) -> None:
        with pg_server.connect(autocommit=True) as conn:
            conn.execute(sql)

    def tables() -> list[str]:
        with pg_server.connect() as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                [schema],
            ).fetchall()
            return sorted(str(name) for (name,) in rows)

    return Database(f"{pg_server.dsn}?schema={schema}", execute, tables)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """An empty database of each SQL kind; its stores closed (and a PostgreSQL schema
    dropped) afterwards."""
    if request.param == "sqlite":
        made = sqlite_database(tmp_path / "jobs.db")
        drop = None
    else:
        pg_server = request.getfixturevalue("pg_server")
        schema = "t_" + uuid.uuid4().hex[:12]
        made = postgres_database(pg_server, schema)
        drop = f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'
    try:
        yield made
    finally:
        for store in made.stores:
            store.close()
        if drop is not None:
            made.execute(drop)


def test_no_tables_is_none_and_asking_creates_none(database: Database) -> None:
    """On an empty database the version is None, and asking for it creates no table, even
    on a store that would create them on first use."""
    assert database.store().schema_version() is None
    assert database.tables() == []


def test_the_version_the_tables_carry(database: Database) -> None:
    """After first use the version is this code's; another value in the row is returned as
    it is, and a meta table without the row reads as None."""
    store = database.store()
    store.schedules()  # first use creates the tables
    assert database.tables() != []
    assert store.schema_version() == str(SCHEMA_VERSION)
    meta = store.backend.table("meta")
    database.execute(f"UPDATE {meta} SET value = '99' WHERE name = 'schema_version'")
    assert store.schema_version() == "99"
    database.execute(f"DELETE FROM {meta}")
    assert database.store(create_schema=False).schema_version() is None
