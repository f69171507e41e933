"""The buffer and the thread that writes it: what keeps PostgreSQL off the run path.

Observers append [`Op`][cronlock.postgres.rows.Op]s to a bounded buffer; one daemon
thread per history (started on the first write, never at import) connects, creates
or upgrades the table, and writes the buffer in batches, each one transaction in
psycopg's pipeline mode (one round trip). While PostgreSQL is down, ops wait and the
thread reconnects with a capped backoff; a batch PostgreSQL keeps refusing is dropped
so that one bad row cannot stall the log.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, Optional

import psycopg

from cronlock.postgres.rows import Op, coalesce
from cronlock.postgres.table import Table

logger = logging.getLogger("cronlock.postgres")

__all__ = ["WARN_INTERVAL_S", "Writer"]

WARN_INTERVAL_S = 60.0  # at most one WARNING of each kind (dropped, unreachable) per minute
_RETRY_MIN_S = 0.2  # reconnect backoff: doubles from this ...
_RETRY_MAX_S = 5.0  # ... up to this
_REJECTIONS_BEFORE_DROP = 3  # a batch PostgreSQL refuses this many times in a row is dropped
_WRITTEN, _DROPPED, _RETRY = "written", "dropped", "retry"  # what one batch came to
# Errors that mean "PostgreSQL is not reachable right now": keep the ops and retry.
_TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError)


class Writer:
    """One history's buffer, writer thread and connection, in one process.

    Attributes:
        thread: the writer thread (None until the first write).
        conn: its open connection (None while disconnected). Never closed by a forked
            child: it is the parent's socket.
    """

    def __init__(
        self,
        table: Table,
        dsn: str,
        connect_kwargs: dict[str, Any],
        *,
        buffer: int,
        batch: int,
        flush_interval: float,
        closed: bool = False,
    ) -> None:
        self.table = table
        self.dsn = dsn
        self.connect_kwargs = connect_kwargs
        self.buffer = buffer
        self.batch = batch
        self.flush_interval = flush_interval
        self.closed = closed
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.ops: deque[Op] = deque()
        self.thread: Optional[threading.Thread] = None
        self.conn: Optional[psycopg.Connection[Any]] = None
        self.written = 0
        self.dropped = 0
        self.gave_up = False
        self._closing = False
        self._give_up_at = float("inf")
        self._dropped_unwarned = 0
        self._last_drop_warning = -float("inf")
        self._last_down_warning = -float("inf")
        self._failures = 0
        self._rejections = 0

    # -- the observer side ------------------------------------------------------------

    def put(self, ops: Iterable[Op]) -> None:
        """Queue ``ops``; never blocks on PostgreSQL, never raises."""
        warn = None
        with self.lock:
            for op in ops:
                if self.closed or len(self.ops) >= self.buffer:
                    warn = self._drop_locked(1) if warn is None else warn
                    continue
                self.ops.append(op)
                if self.thread is None:
                    self.thread = threading.Thread(
                        target=self._run,
                        name=f"cronlock-postgres-history-{self.table.table}",
                        daemon=True,
                    )
                    self.thread.start()
                elif len(self.ops) == 1 or len(self.ops) >= self.batch:
                    self.wake.notify()
        if warn is not None:
            logger.warning(
                "cronlock: PostgreSQL history %s: buffer full (%d writes) or closed; dropped "
                "%d writes since the last warning (%d in all)",
                self.table.name,
                self.buffer,
                warn,
                self.dropped,
            )

    def close(self, timeout: float) -> bool:
        """Write what is buffered (waiting up to ``timeout`` s), then stop the thread."""
        with self.lock:
            self.closed = True
            thread = self.thread
            if thread is None:
                return not self.ops
            self._closing = True
            self._give_up_at = time.monotonic() + timeout
            self.wake.notify_all()
        thread.join(timeout)
        return not self.ops and not self.gave_up

    def _drop_locked(self, count: int) -> Optional[int]:
        """Count ``count`` dropped ops; return how many to report if a WARNING is due."""
        self.dropped += count
        self._dropped_unwarned += count
        now = time.monotonic()
        if now - self._last_drop_warning < WARN_INTERVAL_S:
            return None
        self._last_drop_warning = now
        reported, self._dropped_unwarned = self._dropped_unwarned, 0
        return reported

    # -- the writer thread ------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._step():
                pass
        except Exception:  # a bug here must be visible, not a silently dead thread
            logger.exception("cronlock: PostgreSQL history writer %s stopped", self.table.name)
        finally:
            self.disconnect()

    def _step(self) -> bool:
        """Wait for ops, write one batch; False when the writer should end."""
        with self.lock:
            while not self._closing and not self.ops:
                self.wake.wait()
            deadline = time.monotonic() + self.flush_interval
            while not self._closing and len(self.ops) < self.batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.wake.wait(remaining)
            ops = list(itertools.islice(self.ops, self.batch))
            closing = self._closing
        if not ops:
            return not closing
        result = self._write(ops)
        if result != _RETRY:
            with self.lock:
                for _ in ops:
                    self.ops.popleft()
                if result == _WRITTEN:
                    self.written += len(ops)
                else:
                    self.dropped += len(ops)
            return True
        with self.lock:
            if self._closing and time.monotonic() >= self._give_up_at:
                lost = len(self.ops)
                self.ops.clear()
                self.gave_up = True
                self.dropped += lost
                logger.warning(
                    "cronlock: PostgreSQL history %s closed with %d writes unwritten",
                    self.table.name,
                    lost,
                )
                return False
            backoff = min(_RETRY_MAX_S, _RETRY_MIN_S * 2 ** min(self._failures - 1, 10))
            if self._closing:
                backoff = min(backoff, max(0.0, self._give_up_at - time.monotonic()))
            self.wake.wait(backoff)
        return True

    def _write(self, ops: list[Op]) -> str:
        """One transaction of ``ops``, in order: written, dropped or to retry. Never raises."""
        try:
            conn = self._connect()
            statements = self.table.statements
            with conn.pipeline(), conn.cursor() as cur:
                for name, group in itertools.groupby(coalesce(ops), key=lambda op: op.statement):
                    cur.executemany(statements[name], [op.params for op in group])
            conn.commit()
        except _TRANSIENT as exc:
            self.disconnect()
            self._failures += 1
            now = time.monotonic()
            if now - self._last_down_warning >= WARN_INTERVAL_S:
                self._last_down_warning = now
                logger.warning(
                    "cronlock: PostgreSQL history %s cannot write (%s: %s); %d writes "
                    "buffered, retrying",
                    self.table.name,
                    type(exc).__name__,
                    one_line(exc),
                    len(self.ops),
                )
            return _RETRY
        except Exception as exc:
            return self._refused(exc, len(ops))
        if self._failures:
            logger.info(
                "cronlock: PostgreSQL history %s is writing again after %d failed attempts",
                self.table.name,
                self._failures,
            )
        self._failures = 0
        self._rejections = 0
        return _WRITTEN

    def _refused(self, exc: Exception, count: int) -> str:
        """PostgreSQL refused the ops or the table (dropped table, privileges, a value it
        cannot store). Reconnecting re-creates a missing table; ops it keeps refusing are
        dropped."""
        self.disconnect()
        self._failures += 1
        self._rejections += 1
        if self._rejections < _REJECTIONS_BEFORE_DROP:
            logger.warning(
                "cronlock: PostgreSQL history %s: write refused (%s: %s); retrying",
                self.table.name,
                type(exc).__name__,
                one_line(exc),
            )
            return _RETRY
        logger.error(
            "cronlock: PostgreSQL history %s: dropping %d writes refused %d times (%s: %s)",
            self.table.name,
            count,
            self._rejections,
            type(exc).__name__,
            one_line(exc),
        )
        self._rejections = 0
        return _DROPPED

    def _connect(self) -> psycopg.Connection[Any]:
        conn = self.conn
        if conn is not None and not conn.closed:
            return conn
        conn = psycopg.connect(self.dsn, **self.connect_kwargs)
        try:
            self.table.ensure(conn)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return conn

    def disconnect(self) -> None:
        """Close the connection, if open (never raises)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken: nothing more to release
                logger.debug("cronlock: closing a broken PostgreSQL connection failed")


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())
