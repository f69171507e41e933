"""cronlock's tables, created when absent, and the schema version every process checks.

One set of tables holds every prefix (a ``prefix`` column), so one database serves many
applications. A job's claim state is one row whose ``state`` is a JSON object of the
fields the Redis hash holds; history, pending manual runs, the registry, heartbeats,
dynamic schedules and flags (pause-all, the schedules' version) have a table each, and
so do locks (`cronlock.stores.sql.leases`: one row per key, kept after release).
"""

from __future__ import annotations

from typing import Optional

from cronlock.errors import ConfigurationError
from cronlock.stores.sql.backend import Backend, Cursor

__all__ = ["SCHEMA_VERSION", "SchemaError", "check_version", "read_version", "statements"]

#: The version of the tables this code reads and writes.
SCHEMA_VERSION = 1


class SchemaError(ConfigurationError):
    """The database's tables are absent (``create_schema=False``) or of another version."""


def statements(backend: Backend) -> list[str]:
    """The DDL, idempotent (``IF NOT EXISTS``), for ``backend``'s dialect."""
    t, ident = backend.table, backend.identity
    key = "prefix TEXT NOT NULL, key TEXT NOT NULL"
    return [
        f"CREATE TABLE IF NOT EXISTS {t('meta')} (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {t('jobs')} ({key}, state TEXT NOT NULL,"
        " PRIMARY KEY (prefix, key))",
        f"CREATE TABLE IF NOT EXISTS {t('history')} (id {ident}, {key},"
        " at_ms BIGINT NOT NULL, fields TEXT NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS cronlock_history_job ON {t('history')} (prefix, key, id)",
        f"CREATE TABLE IF NOT EXISTS {t('triggers')} (id {ident}, {key}, request TEXT NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS cronlock_triggers_job ON {t('triggers')} (prefix, key, id)",
        f"CREATE TABLE IF NOT EXISTS {t('pending')} ({key}, PRIMARY KEY (prefix, key))",
        f"CREATE TABLE IF NOT EXISTS {t('registry')} ({key}, entry TEXT NOT NULL,"
        " PRIMARY KEY (prefix, key))",
        f"CREATE TABLE IF NOT EXISTS {t('runners')} (prefix TEXT NOT NULL, runner TEXT NOT NULL,"
        " value TEXT NOT NULL, expires_ms BIGINT NOT NULL, PRIMARY KEY (prefix, runner))",
        f"CREATE TABLE IF NOT EXISTS {t('schedules')} (prefix TEXT NOT NULL, id TEXT NOT NULL,"
        " spec TEXT NOT NULL, PRIMARY KEY (prefix, id))",
        f"CREATE TABLE IF NOT EXISTS {t('flags')} (prefix TEXT NOT NULL, name TEXT NOT NULL,"
        " value TEXT NOT NULL, PRIMARY KEY (prefix, name))",
        f"CREATE TABLE IF NOT EXISTS {t('locks')} ({key}, owner TEXT NOT NULL,"
        " expires_ms BIGINT NOT NULL, fence BIGINT NOT NULL, holder TEXT NOT NULL,"
        " since_ms BIGINT NOT NULL, slot_ms BIGINT, PRIMARY KEY (prefix, key))",
        f"INSERT INTO {t('meta')} (name, value) VALUES ('schema_version', '{SCHEMA_VERSION}')"
        " ON CONFLICT (name) DO NOTHING",
    ]


def read_version(backend: Backend, cursor: Cursor) -> Optional[str]:
    """The ``schema_version`` row of the ``meta`` table (which must exist); None without it."""
    cursor.execute(f"SELECT value FROM {backend.table('meta')} WHERE name = 'schema_version'")
    row = cursor.fetchone()
    return None if row is None else str(row[0])


def check_version(backend: Backend, cursor: Cursor) -> None:
    """Refuse tables written by a newer cronlock (naming both versions)."""
    found = read_version(backend, cursor) or "none"
    if found != str(SCHEMA_VERSION):
        raise SchemaError(
            f"cronlock's tables in {backend.location()} have schema version {found}; this "
            f"cronlock reads and writes version {SCHEMA_VERSION}"
            + (": upgrade cronlock" if found.isdigit() and int(found) > SCHEMA_VERSION else "")
        )
