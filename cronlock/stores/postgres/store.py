"""`PostgresStore`: the [`Store`][cronlock.stores.Store] in PostgreSQL tables.

For services whose shared state is PostgreSQL: every replica connects to one database;
claims are serialised by row locks, leases measured on the server's
``clock_timestamp()``, manual runs and schedule changes announced by ``NOTIFY``. See
docs/stores.md for what an outage or a failover does.
"""

from __future__ import annotations

from typing import Any, Union

import psycopg_pool

from cronlock._validate import check_prefix
from cronlock.stores.postgres.backend import PostgresBackend
from cronlock.stores.sql.store import SqlStore

__all__ = ["PostgresStore"]


class PostgresStore(SqlStore):
    """Shared state of one prefix in schema ``schema`` of a PostgreSQL database.

    Args:
        dsn_or_pool: a libpq DSN that names its database
            (``"postgresql://app@db/app"``, ``"host=db dbname=app"``), or a
            ``psycopg_pool.ConnectionPool`` of yours (used as it is, never closed by
            cronlock; a forked child opens a pool of its own with its settings).
        prefix: namespace of every row; replicas of one app must share it.
        schema: the schema of cronlock's tables (created when absent); one schema
            serves many prefixes.
        create_schema: create the schema and tables when absent (safe when many
            processes start at once); False refuses to run without them.
        timeout: seconds a call may wait for a connection or to connect; on cronlock's
            own pool also for one statement; a transaction left idle for half of it (a
            process frozen inside it) is ended by the server, releasing its row locks.
        max_connections: connections of cronlock's own pool, per process.

    Example:
        ```python
        store = PostgresStore("postgresql://app@db/app", prefix="myapp")
        runner = CronRunner(store, prefix="myapp")
        ```
    """

    def __init__(
        self,
        dsn_or_pool: Union[str, psycopg_pool.ConnectionPool[Any]],
        prefix: str = "cronlock",
        *,
        schema: str = "cronlock",
        create_schema: bool = True,
        timeout: float = 5.0,
        max_connections: int = 8,
    ) -> None:
        backend = PostgresBackend(
            dsn_or_pool,
            prefix=check_prefix(prefix),
            schema=schema,
            timeout=timeout,
            max_connections=max_connections,
        )
        super().__init__(backend, prefix, create_schema=create_schema)
        self.pg = backend
        self.schema = backend.schema

    def __repr__(self) -> str:
        return f"PostgresStore({self.pg.location()}, prefix={self.prefix!r})"
