"""Every store the suite runs its store scenarios on, built one way.

``store`` (a fixture in ``tests/conftest.py``) is parametrised over `STORE_KINDS`: each
test gets a fresh prefix on the session's private Redis, a fresh SQLite file, or a fresh
prefix on the session's private PostgreSQL.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from cronlock.stores import RedisStore, SqliteStore

if TYPE_CHECKING:
    from cronlock.stores.postgres import PostgresStore

STORE_KINDS = ["redis", "sqlite", "postgres"]


def fresh_prefix() -> str:
    return "t" + uuid.uuid4().hex[:10]


def redis_store(url: str, prefix: str) -> RedisStore:
    return RedisStore(redis.Redis.from_url(url, socket_timeout=5), prefix=prefix)


def sqlite_store(directory: Path, prefix: str, **options: Any) -> SqliteStore:
    return SqliteStore(directory / "cronlock.db", prefix=prefix, **options)


def postgres_store(dsn: str, prefix: str, **options: Any) -> PostgresStore:
    """A store on ``dsn`` (imported here: psycopg is optional, the test is skipped without it)."""
    from cronlock.stores.postgres import PostgresStore

    return PostgresStore(dsn, prefix=prefix, **options)
