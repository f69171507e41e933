"""``cronlock store init`` and ``cronlock store check`` on a real SQLite file, the
session's private PostgreSQL and Redis."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronlock.stores import SqliteStore, SqlStore, from_url
from cronlock.stores.sql.schema import SCHEMA_VERSION
from cronlock.testing import RedisServer
from tests.integration.test_cli import cronlock


def store(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cronlock("store", *args, "--store-url", url)


def set_version(path: Path, version: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE cronlock_meta SET value = ? WHERE name = 'schema_version'", [version])


def test_init_creates_the_tables_and_a_second_init_finds_them(tmp_path: Path) -> None:
    """init creates the tables (a store refusing to create them can then use the file),
    names the store, the file and the version; run again it says they are there."""
    path = tmp_path / "jobs.db"
    first = store(f"sqlite:///{path}", "init")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("sqlite: created cronlock's tables")
    assert str(path) in first.stdout
    assert f"schema version {SCHEMA_VERSION}" in first.stdout
    assert SqliteStore(path, create_schema=False).schedules() == {}
    again = cronlock("--json", "store", "init", "--store-url", f"sqlite:///{path}")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {
        "store": "sqlite",
        "location": f"SQLite file {str(path)!r}",
        "schema_version": str(SCHEMA_VERSION),
        "action": "present",
    }


def test_check_passes_on_tables_of_this_version(tmp_path: Path) -> None:
    """check reports the version found and the one this cronlock writes; exit 0."""
    path = tmp_path / "jobs.db"
    SqliteStore(path).schedules()
    out = cronlock("--json", "store", "check", "--store-url", f"sqlite:///{path}")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["found"], report["expected"], report["ok"]) == ("1", "1", True)


def test_check_fails_without_tables_and_creates_nothing(tmp_path: Path) -> None:
    """A file that is not there stays absent; an empty file gets no tables; both exit 1
    pointing at store init."""
    missing = tmp_path / "missing.db"
    out = store(f"sqlite:///{missing}", "check")
    assert out.returncode == 1
    assert "does not exist" in out.stdout
    assert "cronlock store init" in out.stdout
    assert not missing.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    out = store(f"sqlite:///{empty}", "check")
    assert out.returncode == 1
    assert "no cronlock tables (none in" in out.stdout
    assert SqliteStore(empty).schema_version() is None


def test_another_version_fails_check_and_init_naming_both(tmp_path: Path) -> None:
    """Tables of a newer version: check exits 1 naming 99 and 1; init exits 1 and leaves
    them as they are."""
    path = tmp_path / "jobs.db"
    SqliteStore(path).schedules()
    set_version(path, "99")
    check = store(f"sqlite:///{path}", "check")
    assert check.returncode == 1
    assert f"schema version 99; this cronlock reads and writes version {SCHEMA_VERSION}" in (
        check.stdout
    )
    assert "upgrade cronlock" in check.stdout
    init = store(f"sqlite:///{path}", "init")
    assert init.returncode == 1
    assert "schema version 99" in init.stderr
    assert SqliteStore(path).schema_version() == "99"


def test_redis_has_nothing_to_create_or_check(redis_server: RedisServer) -> None:
    """On Redis both commands say there are no tables and exit 0."""
    init = store(redis_server.url, "init")
    assert init.returncode == 0, init.stderr
    assert init.stdout.startswith("redis: nothing to create")
    check = store(redis_server.url, "check")
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("redis: no tables to check")


def test_a_file_that_cannot_be_created_is_a_usage_error(tmp_path: Path) -> None:
    """A SQLite URL whose directory does not exist exits 2 naming it; nothing is made."""
    out = store(f"sqlite:///{tmp_path}/no-such-dir/jobs.db", "init")
    assert out.returncode == 2
    assert f"{tmp_path}/no-such-dir" in out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A URL of the private PostgreSQL naming a schema of this test's own (not created),
    dropped afterwards."""
    schema = "t_" + uuid.uuid4().hex[:12]
    yield f"{pg_server.dsn}?schema={schema}"
    with pg_server.connect(autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_postgresql_init_creates_the_tables_once(pg_url: str) -> None:
    """On PostgreSQL init creates the schema's tables and names the schema; a second init
    finds them; a store refusing to create tables can then use them."""
    schema = pg_url.rpartition("schema=")[2]
    first = store(pg_url, "init")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("postgresql: created cronlock's tables in PostgreSQL")
    assert f"schema {schema!r}: schema version {SCHEMA_VERSION}" in first.stdout
    again = store(pg_url, "init")
    assert again.returncode == 0, again.stderr
    assert "already in" in again.stdout
    made = from_url(pg_url, prefix="p", create_schema=False)
    assert isinstance(made, SqlStore)
    try:
        assert made.schedules() == {}
    finally:
        made.close()


def test_postgresql_check_creates_nothing_then_passes_once_the_tables_exist(
    pg_url: str, pg_server: Any
) -> None:
    """check on a schema that is not there exits 1 and does not create it; once a store
    has made the tables it exits 0."""
    schema = pg_url.rpartition("schema=")[2]
    absent = store(pg_url, "check")
    assert absent.returncode == 1
    assert "no cronlock tables (none in PostgreSQL" in absent.stdout
    with pg_server.connect() as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
        assert found.fetchone() is None
    made = from_url(pg_url, prefix="p")
    assert isinstance(made, SqlStore)
    try:
        made.ensure_schema()
    finally:
        made.close()
    present = store(pg_url, "check")
    assert present.returncode == 0, present.stdout + present.stderr
