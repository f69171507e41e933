"""`SqliteStore`: the [`Store`][cronlock.stores.Store] in one SQLite file.

For the processes of one host (``gunicorn -w 4`` with no Redis): every worker opens the
same file. SQLite has no notifications, so manual runs and schedule changes reach the
runners within their ``poll_interval`` (see docs/stores.md for what that costs).
"""

from __future__ import annotations

import os
from typing import Union

from cronlock.stores.sql.store import SqlStore
from cronlock.stores.sqlite.backend import SqliteBackend

__all__ = ["SqliteStore"]


class SqliteStore(SqlStore):
    """Shared state of one prefix in the SQLite file ``path``.

    Runners on it check for manual runs and schedule changes every second by default
    (`default_poll_interval`): one short transaction per runner per second.

    Args:
        path: the database file (created when absent; its directory must exist). Every
            process that shares the jobs opens the same file; it must be on a local
            disk (SQLite's locking is not reliable on network file systems).
        prefix: namespace of every row; replicas of one app must share it.
        create_schema: create the tables when absent; False refuses instead.
        busy_timeout: how long a write waits for another process's transaction
            (seconds) before it fails as the store being unavailable.
    """

    #: The runner's ``poll_interval`` when none is given (SQLite has no notifications).
    default_poll_interval = 1.0

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        prefix: str = "cronlock",
        *,
        create_schema: bool = True,
        busy_timeout: float = 5.0,
    ) -> None:
        super().__init__(SqliteBackend(path, busy_timeout), prefix, create_schema=create_schema)
        self.path = os.fspath(path)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r}, prefix={self.prefix!r})"
