"""Wake-up events on PostgreSQL ``LISTEN`` / ``NOTIFY``.

A subscription is a dedicated autocommit connection (not one of the pool's: it stays
open as long as the runner listens) that ``LISTEN``s on the store's channel. A
notification is sent by ``pg_notify`` inside a transaction and delivered when it
commits; one sent while a runner is disconnected is lost, as on Redis pub/sub, so the
runner's periodic sync stays the fallback. Not through a transaction-pooling proxy
(PgBouncer in transaction mode keeps no session to listen on).
"""

from __future__ import annotations

import contextlib
import json
import selectors
import time
from collections import deque
from typing import Any, Optional

import psycopg
from psycopg import sql

__all__ = ["Listener"]

# Connection.notifies(timeout=..., stop_after=...) appeared in psycopg 3.2.
_HAS_NOTIFIES_TIMEOUT = tuple(int(p) for p in psycopg.__version__.split(".")[:2]) >= (3, 2)


class Listener:
    """Events of one channel on a connection of its own (a `Subscription`)."""

    def __init__(self, conninfo: str, kwargs: dict[str, Any], channel: str) -> None:
        self._conn = psycopg.connect(conninfo, **{**kwargs, "autocommit": True})
        self._arrived: deque[str] = deque()  # psycopg 3.1: filled while a query runs
        if not _HAS_NOTIFIES_TIMEOUT:  # pragma: no cover
            self._conn.add_notify_handler(lambda n: self._arrived.append(n.payload))
        try:
            self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            self.close()
            raise

    def get(self, timeout: float) -> Optional[dict[str, Any]]:
        """The next event within ``timeout`` s, else None; a lost connection raises
        ``psycopg.OperationalError`` (one of the store's errors)."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            payload = self._next(max(0.0, deadline - time.monotonic()))
            if payload is None:
                return None
            try:
                event = json.loads(payload)
            except ValueError:
                event = None  # not ours: skipped, as on Redis
            if isinstance(event, dict):
                return event
            if time.monotonic() >= deadline:
                return None

    def _next(self, timeout: float) -> Optional[str]:
        if self._conn.closed:
            raise psycopg.OperationalError("the LISTEN connection is closed")
        if _HAS_NOTIFIES_TIMEOUT:
            for notify in self._conn.notifies(timeout=timeout, stop_after=1):
                return notify.payload
            if self._conn.broken:
                raise psycopg.OperationalError("the LISTEN connection was lost")
            return None
        return self._next_selecting(timeout)  # pragma: no cover - psycopg 3.1

    def _next_selecting(self, timeout: float) -> Optional[str]:  # pragma: no cover
        """psycopg 3.1: wait on the socket, then let a query read what arrived."""
        if not self._arrived:
            with selectors.DefaultSelector() as selector:
                selector.register(self._conn.fileno(), selectors.EVENT_READ)
                if not selector.select(timeout):
                    return None
            self._conn.execute("SELECT 1")  # hands the notifications to the handler
        return self._arrived.popleft() if self._arrived else None

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a broken connection may fail
            self._conn.close()
