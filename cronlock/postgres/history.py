"""`PostgresHistory`: the observer that keeps the audit log (see the package docstring)."""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime
from typing import Any, Optional

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from cronlock.clock import monotonic, utc_now
from cronlock.context import JobContext, ms_to_datetime
from cronlock.errors import ConfigurationError
from cronlock.observers import RunRecord
from cronlock.outcomes import ClaimStatus, RunOutcome
from cronlock.postgres import lifecycle, rows
from cronlock.postgres.rows import AuditRow
from cronlock.postgres.table import COLUMNS, Table
from cronlock.postgres.writer import Writer, one_line

logger = logging.getLogger("cronlock.postgres")

__all__ = ["PostgresHistory", "Probe"]

_ENDED_WORDS = [str(o) for o in RunOutcome]


class Probe:
    """What [`PostgresHistory.probe`][cronlock.postgres.PostgresHistory.probe] found."""

    def __init__(self, name: str, ok: bool, latency_ms: Optional[float], error: str) -> None:
        self.name = name
        self.ok = ok
        self.latency_ms = latency_ms
        self.error = error

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields."""
        return {"name": self.name, "ok": self.ok, "latency_ms": self.latency_ms,
                "error": self.error or None}  # fmt: skip


class PostgresHistory:
    """An observer that writes a row when a run starts and updates it when the run ends.

    Args:
        dsn: a libpq connection string or URL (``"postgresql://user@host/db"``,
            ``"host=... dbname=..."``). Checked for syntax here; nothing connects until
            the first write.
        table: table name (created if missing, upgraded if an older version made it).
        schema: schema of the table (created if missing); default: the search path.
        buffer: writes kept in memory while PostgreSQL is slow or down; beyond it new
            ones are dropped (counted in [`dropped`][cronlock.postgres.PostgresHistory.dropped]).
        batch: writes per transaction.
        flush_interval: seconds a write may wait for a batch to fill before it is sent.
        connect_timeout: seconds a connection attempt may take (unless the DSN sets it).

    Example:
        ```python
        history = PostgresHistory("postgresql://app@db/app", schema="ops")
        runner = CronRunner(client, observers=[history])
        ...
        history.read(job="sync-users", limit=10)   # ended runs, newest first
        history.rows(job="sync-users")             # every row, running ones included
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
        self._table = Table(table, schema)
        self._connect_kwargs: dict[str, Any] = {}
        if "connect_timeout" not in params:
            # libpq takes whole seconds; 0 would mean "wait forever".
            self._connect_kwargs["connect_timeout"] = max(1, round(connect_timeout))
        self.writer = self._new_writer(float(flush_interval), closed=False)
        lifecycle.track(self)

    def _new_writer(self, flush_interval: float, *, closed: bool) -> Writer:
        return Writer(
            self._table,
            self.dsn,
            self._connect_kwargs,
            buffer=self.buffer,
            batch=self.batch,
            flush_interval=flush_interval,
            closed=closed,
        )

    # -- the observer side: called on the runner's threads; never blocks, never raises --

    def run_started(self, ctx: JobContext, started_at: datetime) -> None:
        """Queue the row of a run that starts (and, for a takeover, the end of the
        attempt it took over)."""
        self._put(rows.started(ctx, _holder(ctx), started_at))

    def run_finished(self, record: RunRecord) -> None:
        """Queue the update of the run's row with how it ended."""
        self._put([rows.ended(record)])

    def claimed(self, key: str, slot_ms: int, status: ClaimStatus, runner_id: str) -> None:
        """A slot abandoned after ``max_attempts``: queue the end of its last attempt's row."""
        if status == ClaimStatus.EXHAUSTED:
            self._put([rows.abandoned(key, ms_to_datetime(slot_ms), utc_now())])

    def _put(self, ops: list[rows.Op]) -> None:
        if self.writer.thread is None and not self.writer.closed:
            lifecycle.install_atexit()
        self.writer.put(ops)

    @property
    def flush_interval(self) -> float:
        """Seconds a write may wait for its batch to fill."""
        return self.writer.flush_interval

    @flush_interval.setter
    def flush_interval(self, seconds: float) -> None:
        self.writer.flush_interval = seconds

    @property
    def dropped(self) -> int:
        """Writes that will never be made (buffer full, closed, or refused)."""
        return self.writer.dropped

    @property
    def written(self) -> int:
        """Writes committed by this process (a run's start and its end are one each)."""
        return self.writer.written

    @property
    def pending(self) -> int:
        """Writes waiting in memory."""
        return len(self.writer.ops)

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is buffered (waiting up to ``timeout`` s), then stop the writer.

        Writes that arrive after ``close`` are dropped (and counted). Returns True when
        nothing is left unwritten. Also called, with a 5 s limit, at interpreter exit.
        """
        return self.writer.close(timeout)

    # -- the operator side: a short connection of its own; psycopg errors propagate ----

    def probe(self) -> Probe:
        """Connect and ``SELECT 1`` (bounded by ``connect_timeout``): for health checks.

        Never raises; the writer's connection is not used, so a probe says whether a
        new connection can be made now.
        """
        started = monotonic()
        try:
            with psycopg.connect(self.dsn, **self._connect_kwargs) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:  # any failure is "unreachable", named in the report
            return Probe(self._table.name, False, None, f"{type(exc).__name__}: {one_line(exc)}")
        return Probe(self._table.name, True, round((monotonic() - started) * 1000, 3), "")

    def rows(self, job: Optional[str] = None, limit: int = 100) -> list[AuditRow]:
        """The latest ``limit`` rows (of ``job``, or of every job), newest first: running
        runs, ended ones, attempts taken over and slots abandoned. A table that does not
        exist yet reads empty."""
        return self._select(job, limit, ended_only=False)

    def read(self, job: Optional[str] = None, limit: int = 100) -> list[RunRecord]:
        """The latest ``limit`` runs that their owner ended (a
        [`RunOutcome`][cronlock.outcomes.RunOutcome]), newest first, as `RunRecord`s."""
        found = (rows.record(row) for row in self._select(job, limit, ended_only=True))
        return [r for r in found if r is not None]

    def _select(self, job: Optional[str], limit: int, *, ended_only: bool) -> list[AuditRow]:
        where: list[sql.Composable] = []
        args: list[Any] = []
        if job is not None:
            where.append(sql.SQL("job = %s"))
            args.append(job)
        if ended_only:
            where.append(sql.SQL("status = ANY(%s) AND finished_at IS NOT NULL"))
            args.append(_ENDED_WORDS)
        statement = sql.SQL(
            "SELECT id, {cols} FROM {table} {where} "
            "ORDER BY coalesce(started_at, finished_at) DESC, id DESC LIMIT %s"
        ).format(
            cols=sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS if c != "run_id"),
            table=self._table.ident,
            where=sql.SQL("WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL(""),
        )
        args.append(int(limit))
        with psycopg.connect(self.dsn, **self._connect_kwargs) as conn:
            try:
                found = conn.execute(statement, args).fetchall()
            except psycopg.errors.UndefinedTable:
                return []
        return [rows.audit_row(r) for r in found]

    # -- process lifecycle ------------------------------------------------------------

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh, empty writer (the parent writes what it had)."""
        self.writer = self._new_writer(self.writer.flush_interval, closed=self.writer.closed)

    def close_at_exit(self, timeout: float) -> None:
        """At interpreter exit: flush, if a writer ever started."""
        if self.writer.thread is not None:
            self.close(timeout=timeout)

    def __repr__(self) -> str:
        return (
            f"<PostgresHistory {self._table.name} pending={self.pending} "
            f"written={self.written} dropped={self.dropped}>"
        )


def _holder(ctx: JobContext) -> str:
    """The run's process, as `RunRecord.holder` names it."""
    return f"{socket.gethostname()}:{os.getpid()}:{ctx.runner_id}"
