"""PostgreSQL audit log of runs: an observer that copies every finished run into a table.

Install the extra (``pip install "cronlock[postgres]"``, psycopg 3) and pass an instance
to the runner:

```python
history = PostgresHistory("postgresql://app@db/app")
runner = CronRunner(client, prefix="myapp", observers=[history])
```

What it guarantees, and what it does not:

* **A run is never slowed or broken by PostgreSQL.** ``run_finished`` only appends a row
  to an in-memory buffer; a daemon writer thread of its own (started on the first
  record, never at import or construction) connects, creates the table if missing, and
  writes batches with ``COPY``.
* **Bounded memory.** When PostgreSQL is down, rows wait in the buffer (``buffer``
  rows at most) and the writer reconnects with a capped backoff. Once the buffer is
  full, new rows are dropped and counted in
  [`PostgresHistory.dropped`][cronlock.postgres.PostgresHistory.dropped], with a WARNING at most
  once a minute. The log is an audit trail, not a guarantee: rows waiting in memory are lost if the
  process dies.
* **Fork-aware.** A forked child (gunicorn workers) starts with an empty buffer, no
  writer and no connection: it never touches its parent's socket, and the parent
  alone writes what it had buffered.
* **One row per finished run.** A run whose process died (kill -9) leaves no row; its
  takeover appears as the next attempt of the same slot.

The table (created with ``CREATE TABLE IF NOT EXISTS`` under an advisory lock, so many
replicas starting at once do not race; an existing table is used as it is):

```text
id             bigserial primary key
job            text         the job's key
slot           timestamptz  the scheduled occurrence
attempt        integer      1, or 2+ after a takeover
fencing_token  bigint
owner          text         "host:pid:runner-id" (RunRecord.holder)
runner_id      text
status         text         a RunOutcome: succeeded | failed | cancelled | lost
started_at     timestamptz
finished_at    timestamptz
duration       double precision  seconds
error_type     text         exception class name of a failed run, else null
traceback      text         its traceback (last 4000 characters), else null

indexes: (job, started_at) and (started_at)
```
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import threading
import time
import weakref
from collections import deque
from datetime import timezone
from typing import Any, Optional, cast

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from cronlock.errors import ConfigurationError
from cronlock.observers import RunRecord
from cronlock.outcomes import RunOutcome

logger = logging.getLogger(__name__)

__all__ = ["COLUMNS", "PostgresHistory"]

#: The table's columns, in order; `owner` holds `RunRecord.holder` and `status` the
#: [`RunOutcome`][cronlock.outcomes.RunOutcome]'s word (stored names, kept as they are).
COLUMNS = (
    "job",
    "slot",
    "attempt",
    "fencing_token",
    "owner",
    "runner_id",
    "status",
    "started_at",
    "finished_at",
    "duration",
    "error_type",
    "traceback",
)

WARN_INTERVAL_S = 60.0  # at most one WARNING of each kind (dropped, unreachable) per minute
_RETRY_MIN_S = 0.2  # reconnect backoff: doubles from this ...
_RETRY_MAX_S = 5.0  # ... up to this
_REJECTIONS_BEFORE_DROP = 3  # a batch PostgreSQL refuses this many times in a row is dropped
_CLOSE_AT_EXIT_S = 5.0  # how long interpreter exit waits for buffered rows
# Errors that mean "PostgreSQL is not reachable right now": keep the rows and retry.
_TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError)

_instances: weakref.WeakSet[PostgresHistory] = weakref.WeakSet()


class _Hooks:
    """Process-wide hooks, installed once, on demand (never at import)."""

    lock = threading.Lock()
    fork_installed = False
    atexit_installed = False


class PostgresHistory:
    """An observer that appends every finished run to a PostgreSQL table.

    Args:
        dsn: a libpq connection string or URL (``"postgresql://user@host/db"``,
            ``"host=... dbname=..."``). Checked for syntax here; nothing connects until
            the first record.
        table: table name (created if missing).
        schema: schema of the table (created if missing); default: the search path.
        buffer: rows kept in memory while PostgreSQL is slow or down; beyond it new
            rows are dropped (counted in [`dropped`][cronlock.postgres.PostgresHistory.dropped]).
        batch: rows written per ``COPY``.
        flush_interval: seconds a row may wait for a batch to fill before it is written.
        connect_timeout: seconds a connection attempt may take (unless the DSN sets it).

    Example:
        ```python
        history = PostgresHistory("postgresql://app@db/app", schema="ops")
        runner = CronRunner(client, observers=[history])
        ...
        history.read(job="sync-users", limit=10)   # newest first
        history.close(timeout=5)                   # flush before exit (also at exit)
        ```
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "cronlock_runs",
        schema: Optional[str] = None,
        buffer: int = 10_000,
        batch: int = 500,
        flush_interval: float = 1.0,
        connect_timeout: float = 5.0,
    ) -> None:
        if not isinstance(dsn, str):
            raise ConfigurationError(f"dsn must be a str; got {dsn!r}")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"dsn is not a valid connection string: {exc}") from None
        for name, value in (("table", table), ("schema", schema)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigurationError(f"{name} must be a non-empty str; got {value!r}")
        for name, number in (("buffer", buffer), ("batch", batch)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise ConfigurationError(f"{name} must be an int >= 1; got {number!r}")
        for name, seconds in (
            ("flush_interval", flush_interval),
            ("connect_timeout", connect_timeout),
        ):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
                raise ConfigurationError(f"{name} must be a number > 0; got {seconds!r}")
        self.dsn = dsn
        self.table = table
        self.schema = schema
        self.buffer = buffer
        self.batch = batch
        self.flush_interval = float(flush_interval)
        self._connect_kwargs: dict[str, Any] = {}
        if "connect_timeout" not in params:
            # libpq takes whole seconds; 0 would mean "wait forever".
            self._connect_kwargs["connect_timeout"] = max(1, round(connect_timeout))
        self._ident = sql.Identifier(schema, table) if schema else sql.Identifier(table)
        self._closed = False
        self._reset()
        _track(self)

    # -- the observer side: called on the runner's worker threads ----------------------

    def run_finished(self, record: RunRecord) -> None:
        """Queue ``record`` for writing; never blocks on PostgreSQL, never raises."""
        row = _row(record)
        with self._lock:
            if self._closed or len(self._rows) >= self.buffer:
                warn = self._drop_locked(1)
            else:
                warn = None
                self._rows.append(row)
                if self._thread is None:
                    self._start_locked()
                elif len(self._rows) == 1 or len(self._rows) >= self.batch:
                    self._wake.notify()
        if warn is not None:
            logger.warning(
                "cronlock: PostgreSQL history %s: buffer full (%d rows) or closed; dropped "
                "%d run records since the last warning (%d in all)",
                self._name(),
                self.buffer,
                warn,
                self.dropped,
            )

    @property
    def dropped(self) -> int:
        """Run records that will never be written (buffer full, closed, or refused)."""
        return self._dropped

    @property
    def written(self) -> int:
        """Run records written (committed) by this process."""
        return self._written

    @property
    def pending(self) -> int:
        """Run records waiting in memory."""
        return len(self._rows)

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is buffered (waiting up to ``timeout`` s), then stop the writer.

        Records that arrive after ``close`` are dropped (and counted). Returns True when
        nothing is left unwritten. Also called, with a 5 s limit, at interpreter exit.
        """
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is None:
                return not self._rows
            self._closing = True
            self._give_up_at = time.monotonic() + timeout
            self._wake.notify_all()
        thread.join(timeout)
        return not self._rows and not self._gave_up

    # -- the operator side ------------------------------------------------------------

    def read(self, job: Optional[str] = None, limit: int = 100) -> list[RunRecord]:
        """The latest ``limit`` runs (of ``job``, or of every job), newest first.

        Opens a short connection of its own (psycopg errors propagate: this is for
        operators, not for the run path). A table that does not exist yet reads empty.
        """
        query = sql.SQL(
            "SELECT {cols} FROM {table} {where} ORDER BY started_at DESC, id DESC LIMIT %s"
        )
        where = sql.SQL("WHERE job = %s") if job is not None else sql.SQL("")
        args: list[Any] = [job] if job is not None else []
        args.append(int(limit))
        statement = query.format(
            cols=sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS if c != "duration"),
            table=self._ident,
            where=where,
        )
        with psycopg.connect(self.dsn, **self._connect_kwargs) as conn:
            try:
                rows = conn.execute(statement, args).fetchall()
            except psycopg.errors.UndefinedTable:
                return []
        utc = timezone.utc
        return [
            RunRecord(
                key=r[0],
                slot=r[1].astimezone(utc),
                attempt=r[2],
                fencing_token=r[3],
                holder=r[4],
                runner_id=r[5],
                status=_outcome(r[6]),
                started_at=r[7].astimezone(utc),
                finished_at=r[8].astimezone(utc),
                error_type=r[9],
                traceback=r[10],
            )
            for r in rows
        ]

    # -- the writer thread ------------------------------------------------------------

    def _reset(self) -> None:
        """Fresh per-process state (at construction, and in a forked child)."""
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._rows: deque[tuple[Any, ...]] = deque()
        self._thread: Optional[threading.Thread] = None
        # Never closed here: in a forked child it is the parent's socket. psycopg
        # only terminates a connection in the process that opened it.
        self._conn: Optional[psycopg.Connection[Any]] = None
        self._closing = False
        self._give_up_at = float("inf")
        self._gave_up = False
        self._written = 0
        self._dropped = 0
        self._dropped_unwarned = 0
        self._last_drop_warning = -float("inf")
        self._last_down_warning = -float("inf")
        self._failures = 0
        self._rejections = 0

    def _start_locked(self) -> None:
        _install_atexit()
        self._thread = threading.Thread(
            target=self._writer, name=f"cronlock-postgres-history-{self.table}", daemon=True
        )
        self._thread.start()

    def _drop_locked(self, count: int) -> Optional[int]:
        """Count ``count`` dropped rows; return how many to report if a WARNING is due."""
        self._dropped += count
        self._dropped_unwarned += count
        now = time.monotonic()
        if now - self._last_drop_warning < WARN_INTERVAL_S:
            return None
        self._last_drop_warning = now
        reported, self._dropped_unwarned = self._dropped_unwarned, 0
        return reported

    def _writer(self) -> None:
        try:
            while self._step():
                pass
        except Exception:  # a bug here must be visible, not a silently dead thread
            logger.exception("cronlock: PostgreSQL history writer %s stopped", self._name())
        finally:
            self._disconnect()

    def _step(self) -> bool:
        """Wait for rows, write one batch; False when the writer should end."""
        with self._lock:
            while not self._closing and not self._rows:
                self._wake.wait()
            deadline = time.monotonic() + self.flush_interval
            while not self._closing and len(self._rows) < self.batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._wake.wait(remaining)
            rows = list(itertools.islice(self._rows, self.batch))
            closing = self._closing
        if not rows:
            return not closing
        if self._write(rows):
            with self._lock:
                for _ in rows:
                    self._rows.popleft()
                self._written += len(rows)
            return True
        with self._lock:
            if self._closing and time.monotonic() >= self._give_up_at:
                lost = len(self._rows)
                self._rows.clear()
                self._gave_up = True
                self._dropped += lost
                logger.warning(
                    "cronlock: PostgreSQL history %s closed with %d run records unwritten",
                    self._name(),
                    lost,
                )
                return False
            backoff = min(_RETRY_MAX_S, _RETRY_MIN_S * 2 ** min(self._failures - 1, 10))
            if self._closing:
                backoff = min(backoff, max(0.0, self._give_up_at - time.monotonic()))
            self._wake.wait(backoff)
        return True

    def _write(self, rows: list[tuple[Any, ...]]) -> bool:
        """One COPY of ``rows``; True once committed. Never raises."""
        try:
            conn = self._connect()
            copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
                self._ident, sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
            )
            with conn.cursor() as cur, cur.copy(copy_sql) as copy:
                for row in rows:
                    copy.write_row(row)
            conn.commit()
        except _TRANSIENT as exc:
            self._disconnect()
            self._failures += 1
            now = time.monotonic()
            if now - self._last_down_warning >= WARN_INTERVAL_S:
                self._last_down_warning = now
                logger.warning(
                    "cronlock: PostgreSQL history %s cannot write (%s: %s); %d run records "
                    "buffered, retrying",
                    self._name(),
                    type(exc).__name__,
                    _one_line(exc),
                    len(self._rows),
                )
            return False
        except Exception as exc:
            # PostgreSQL refused the rows or the table (dropped table, privileges, a
            # value it cannot store). Reconnecting re-creates a missing table; rows it
            # keeps refusing are dropped so one bad batch cannot stall the log.
            self._disconnect()
            self._failures += 1
            self._rejections += 1
            if self._rejections < _REJECTIONS_BEFORE_DROP:
                logger.warning(
                    "cronlock: PostgreSQL history %s: write refused (%s: %s); retrying",
                    self._name(),
                    type(exc).__name__,
                    _one_line(exc),
                )
                return False
            logger.error(
                "cronlock: PostgreSQL history %s: dropping %d run records refused %d times "
                "(%s: %s)",
                self._name(),
                len(rows),
                self._rejections,
                type(exc).__name__,
                _one_line(exc),
            )
            with self._lock:
                for _ in rows:
                    self._rows.popleft()
                self._dropped += len(rows)
            self._rejections = 0
            return True
        if self._failures:
            logger.info(
                "cronlock: PostgreSQL history %s is writing again after %d failed attempts",
                self._name(),
                self._failures,
            )
        self._failures = 0
        self._rejections = 0
        return True

    def _connect(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        conn = psycopg.connect(self.dsn, **self._connect_kwargs)
        try:
            self._ensure_table(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _ensure_table(self, conn: psycopg.Connection[Any]) -> None:
        """Create the schema, table and indexes unless the table exists."""
        qualified = f"{self.schema}.{self.table}" if self.schema else self.table
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", [self._ident.as_string(conn)])
            row = cur.fetchone()
            if row is not None and row[0] is not None:
                conn.commit()
                return
            # Replicas starting together would race on CREATE ... IF NOT EXISTS (a
            # unique violation in the catalog): serialize them.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"cronlock:{qualified}"])
            if self.schema:
                cur.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
                )
            cur.execute(
                sql.SQL(
                    """CREATE TABLE IF NOT EXISTS {} (
                        id bigserial PRIMARY KEY,
                        job text NOT NULL,
                        slot timestamptz NOT NULL,
                        attempt integer NOT NULL,
                        fencing_token bigint NOT NULL,
                        owner text NOT NULL,
                        runner_id text NOT NULL,
                        status text NOT NULL,
                        started_at timestamptz NOT NULL,
                        finished_at timestamptz NOT NULL,
                        duration double precision NOT NULL,
                        error_type text,
                        traceback text
                    )"""
                ).format(self._ident)
            )
            for suffix, columns in (
                ("job_started_idx", "job, started_at"),
                ("started_idx", "started_at"),
            ):
                cur.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                        sql.Identifier(f"{self.table}_{suffix}"), self._ident, sql.SQL(columns)
                    )
                )
        conn.commit()

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken: nothing more to release
                logger.debug("cronlock: closing a broken PostgreSQL connection failed")

    def _name(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table

    def __repr__(self) -> str:
        return (
            f"<PostgresHistory {self._name()} pending={self.pending} written={self.written} "
            f"dropped={self.dropped}>"
        )


def _row(record: RunRecord) -> tuple[Any, ...]:
    return (
        _text(record.key),
        record.slot,
        record.attempt,
        record.fencing_token,
        _text(record.holder),
        _text(record.runner_id),
        str(record.status),  # the RunOutcome's word
        record.started_at,
        record.finished_at,
        record.duration,
        None if record.error_type is None else _text(record.error_type),
        None if record.traceback is None else _text(record.traceback),
    )


def _outcome(word: str) -> RunOutcome:
    """A stored status as a `RunOutcome`; a word this version does not know stays a str."""
    try:
        return RunOutcome(word)
    except ValueError:
        return cast(RunOutcome, word)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _text(value: str) -> str:
    # PostgreSQL text cannot hold NUL; an exception message can.
    return value.replace("\x00", "\\x00")


# -- process lifecycle: fork and exit ------------------------------------------------------


def _track(history: PostgresHistory) -> None:
    with _Hooks.lock:
        _instances.add(history)
        if not _Hooks.fork_installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _Hooks.fork_installed = True


def _after_fork_in_child() -> None:
    # The parent keeps writing what it had buffered; the child starts empty, with its
    # own locks (the parent's may have been held by a thread that does not exist here).
    _Hooks.lock = threading.Lock()
    for history in list(_instances):
        history._reset()


def _install_atexit() -> None:
    with _Hooks.lock:
        if not _Hooks.atexit_installed:
            atexit.register(_close_all_at_exit)
            _Hooks.atexit_installed = True


def _close_all_at_exit() -> None:
    for history in list(_instances):
        if history._thread is not None:
            history.close(timeout=_CLOSE_AT_EXIT_S)
