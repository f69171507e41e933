"""`PostgresStore`: shared state in PostgreSQL (needs the ``postgres`` extra: psycopg 3)."""

from __future__ import annotations

from cronlock.stores.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
