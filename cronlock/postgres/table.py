"""The audit table: its columns, creating or upgrading it, and the statements that write it.

One row per run attempt. A run's start inserts it (`status` ``running``); its end
updates the same row, found by `run_id`. The takeover of an attempt, or a slot
abandoned after ``max_attempts``, ends the rows of the attempts that never ended.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection, sql

__all__ = ["COLUMNS", "END", "START", "Table"]

#: The table's columns, in order (besides ``id``); `owner` holds `RunRecord.holder`.
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
    "kind",
    "trigger_id",
    "run_id",
)

#: Columns a run's start writes (the rest stay null until it ends).
START = (
    "job",
    "slot",
    "attempt",
    "fencing_token",
    "owner",
    "runner_id",
    "status",
    "started_at",
    "kind",
    "trigger_id",
    "run_id",
)
#: Columns a run's end writes: all of them.
END = COLUMNS
#: What a run's end changes in the row its start wrote.
_ENDED = ("status", "finished_at", "duration", "error_type", "traceback")

# Columns a table created by cronlock 0.x lacks, and the ones it declared NOT NULL that a
# running row, or a row for an attempt whose process died, leaves empty.
_ADDED = ("kind text", "trigger_id text", "run_id text")
_NULLABLE = ("attempt", "fencing_token", "owner", "runner_id", "started_at", "finished_at",
             "duration")  # fmt: skip


class Table:
    """One audit table: its name and the statements that write it."""

    def __init__(self, table: str, schema: str | None) -> None:
        self.table = table
        self.schema = schema
        self.ident = sql.Identifier(schema, table) if schema else sql.Identifier(table)
        self.name = f"{schema}.{table}" if schema else table
        cols = sql.SQL(", ").join
        self.statements: dict[str, sql.Composed] = {
            "start": sql.SQL(
                "INSERT INTO {t} ({c}) VALUES ({v}) ON CONFLICT (run_id) DO NOTHING"
            ).format(
                t=self.ident,
                c=cols(map(sql.Identifier, START)),
                v=cols(sql.Placeholder(c) for c in START),
            ),
            "end": sql.SQL(
                "INSERT INTO {t} ({c}) VALUES ({v}) ON CONFLICT (run_id) DO UPDATE SET {u}"
            ).format(
                t=self.ident,
                c=cols(map(sql.Identifier, END)),
                v=cols(sql.Placeholder(c) for c in END),
                u=cols(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in _ENDED),
            ),
            # An attempt's takeover ends the rows of the earlier attempts still running;
            # when the dead attempt never wrote its row, one is written for it.
            "taken_over": sql.SQL(
                "WITH ended AS (UPDATE {t} SET status = 'taken_over', finished_at = %(at)s, "
                "duration = extract(epoch FROM %(at)s - started_at) "
                "WHERE job = %(job)s AND slot = %(slot)s AND attempt < %(attempt)s "
                "AND status = 'running' RETURNING attempt) "
                "INSERT INTO {t} (job, slot, attempt, status, finished_at, kind) "
                "SELECT %(job)s, %(slot)s, %(attempt)s - 1, 'taken_over', %(at)s, %(kind)s "
                "WHERE NOT EXISTS (SELECT 1 FROM ended WHERE attempt = %(attempt)s - 1) "
                "AND NOT EXISTS (SELECT 1 FROM {t} WHERE job = %(job)s AND slot = %(slot)s "
                "AND attempt = %(attempt)s - 1)"
            ).format(t=self.ident),
            # A slot abandoned after max_attempts: its last attempt never ended.
            "abandoned": sql.SQL(
                "WITH ended AS (UPDATE {t} SET status = 'abandoned', finished_at = %(at)s, "
                "duration = extract(epoch FROM %(at)s - started_at) "
                "WHERE job = %(job)s AND slot = %(slot)s AND status = 'running' "
                "RETURNING id) "
                "INSERT INTO {t} (job, slot, status, finished_at) "
                "SELECT %(job)s, %(slot)s, 'abandoned', %(at)s "
                "WHERE NOT EXISTS (SELECT 1 FROM ended) "
                "AND NOT EXISTS (SELECT 1 FROM {t} WHERE job = %(job)s AND slot = %(slot)s "
                "AND status = 'abandoned')"
            ).format(t=self.ident),
        }

    def ensure(self, conn: Connection[Any]) -> None:
        """Create the schema, table and indexes, or upgrade a table an older version made."""
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", [self.ident.as_string(conn)])
            row = cur.fetchone()
            if row is not None and row[0] is not None and self._current(conn):
                conn.commit()
                return
            # Replicas starting together would race on CREATE ... IF NOT EXISTS (a
            # unique violation in the catalog): serialize them.
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"cronlock:{self.name}"])
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
                        attempt integer,
                        fencing_token bigint,
                        owner text,
                        runner_id text,
                        status text NOT NULL,
                        started_at timestamptz,
                        finished_at timestamptz,
                        duration double precision,
                        error_type text,
                        traceback text,
                        kind text,
                        trigger_id text,
                        run_id text
                    )"""
                ).format(self.ident)
            )
            for column in _ADDED:
                cur.execute(
                    sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}").format(
                        self.ident, sql.SQL(column)
                    )
                )
            for column in _NULLABLE:
                cur.execute(
                    sql.SQL("ALTER TABLE {} ALTER COLUMN {} DROP NOT NULL").format(
                        self.ident, sql.Identifier(column)
                    )
                )
            for suffix, columns, unique in (
                ("job_started_idx", "job, started_at", False),
                ("started_idx", "started_at", False),
                ("job_slot_idx", "job, slot", False),
                ("run_idx", "run_id", True),
            ):
                cur.execute(
                    sql.SQL("CREATE {} INDEX IF NOT EXISTS {} ON {} ({})").format(
                        sql.SQL("UNIQUE" if unique else ""),
                        sql.Identifier(f"{self.table}_{suffix}"),
                        self.ident,
                        sql.SQL(columns),
                    )
                )
        conn.commit()

    def _current(self, conn: Connection[Any]) -> bool:
        """The existing table has every column this version writes."""
        schema = sql.SQL("%s") if self.schema else sql.SQL("current_schema()")
        query = sql.SQL(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = {} "
            "AND table_name = %s AND column_name = ANY(%s)"
        ).format(schema)
        args: list[Any] = [self.schema] if self.schema else []
        row = conn.execute(query, [*args, self.table, ["kind", "trigger_id", "run_id"]]).fetchone()
        return row is not None and row[0] == 3
