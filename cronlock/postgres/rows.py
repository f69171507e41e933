"""What the audit log writes for each thing a runner tells it, and what it reads back.

Each write is an `Op`: the name of one of [`Table`][cronlock.postgres.table.Table]'s
statements and its parameters. The `kind` column says why a run happened:
``scheduled`` (its slot came), ``manual`` (an operator's trigger; `trigger_id` says
which) or ``takeover`` (attempt 2 or later of a slot whose previous attempt's lease
lapsed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, cast

from cronlock.context import JobContext
from cronlock.observers import RunRecord
from cronlock.outcomes import RunKind, RunOutcome

__all__ = ["AuditRow", "Op", "abandoned", "audit_row", "coalesce", "ended", "record", "started"]

#: The `kind` of attempt 2 or later of a scheduled slot.
TAKEOVER = "takeover"


@dataclass(frozen=True)
class Op:
    """One write: a statement name and its parameters."""

    statement: str
    params: dict[str, Any]


@dataclass(frozen=True)
class AuditRow:
    """One row of the audit table, as [`rows()`][cronlock.postgres.PostgresHistory.rows]
    reads it. Fields the writer could not know (the attempt that was abandoned, the
    process of an attempt that died before its row was written) are None.

    Attributes:
        status: ``running``, a [`RunOutcome`][cronlock.outcomes.RunOutcome] word
            (``succeeded``, ``failed``, ``cancelled``, ``lost``), ``taken_over`` or
            ``abandoned``.
        kind: ``scheduled``, ``manual`` or ``takeover`` (None for an abandoned slot's
            row written without its attempt).
    """

    id: int
    job: str
    slot: datetime
    status: str
    attempt: Optional[int] = None
    fencing_token: Optional[int] = None
    holder: Optional[str] = None
    runner_id: Optional[str] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    duration: Optional[float] = None
    error_type: Optional[str] = None
    traceback: Optional[str] = None
    kind: Optional[str] = None
    trigger_id: Optional[str] = None


def kind_of(kind: str, attempt: int) -> str:
    """The `kind` word of a run: ``manual``, ``takeover`` (attempt > 1) or ``scheduled``."""
    if kind == RunKind.MANUAL:
        return str(RunKind.MANUAL)
    return TAKEOVER if attempt > 1 else str(RunKind.SCHEDULED)


def run_id(runner_id: str, key: str, slot_ms: int, attempt: int, fence: int) -> str:
    """What tells one run's row from every other: its runner, job, slot, attempt and fence."""
    return f"{runner_id}:{fence}:{attempt}:{slot_ms}:{key}"


def started(ctx: JobContext, holder: str, at: datetime) -> list[Op]:
    """A run started: its row; for a takeover, the end of the attempt it took over."""
    kind = kind_of(ctx.kind, ctx.attempt)
    ops = []
    if ctx.attempt > 1 and ctx.kind != RunKind.MANUAL:
        previous = kind_of(RunKind.SCHEDULED, ctx.attempt - 1)
        params = {"job": _text(ctx.key), "slot": ctx.slot, "attempt": ctx.attempt, "at": at}
        ops.append(Op("taken_over", {**params, "kind": previous}))
    ops.append(
        Op(
            "start",
            {
                "job": _text(ctx.key),
                "slot": ctx.slot,
                "attempt": ctx.attempt,
                "fencing_token": ctx.fencing_token,
                "owner": _text(holder),
                "runner_id": _text(ctx.runner_id),
                "status": "running",
                "started_at": at,
                "kind": kind,
                "trigger_id": ctx.trigger_id,
                "run_id": _text(
                    run_id(ctx.runner_id, ctx.key, ctx.slot_ms, ctx.attempt, ctx.fencing_token)
                ),
            },
        )
    )
    return ops


def ended(record: RunRecord) -> Op:
    """A run ended: its row updated (or written whole, when its start row is missing)."""
    slot_ms = round(record.slot.timestamp() * 1000)
    return Op(
        "end",
        {
            "job": _text(record.key),
            "slot": record.slot,
            "attempt": record.attempt,
            "fencing_token": record.fencing_token,
            "owner": _text(record.holder),
            "runner_id": _text(record.runner_id),
            "status": str(record.status),  # the RunOutcome's word
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "duration": record.duration,
            "error_type": None if record.error_type is None else _text(record.error_type),
            "traceback": None if record.traceback is None else _text(record.traceback),
            "kind": kind_of(record.kind, record.attempt),
            "trigger_id": record.trigger_id,
            "run_id": _text(
                run_id(record.runner_id, record.key, slot_ms, record.attempt, record.fencing_token)
            ),
        },
    )


def coalesce(ops: list[Op]) -> list[Op]:
    """``ops`` less the start rows whose run also ends within them: the end writes the
    whole row, and one transaction commits both, so the start adds nothing but a round
    of index work (most runs are short enough to start and end within one batch)."""
    ending = {op.params["run_id"] for op in ops if op.statement == "end"}
    return [op for op in ops if op.statement != "start" or op.params["run_id"] not in ending]


def abandoned(key: str, slot: datetime, at: datetime) -> Op:
    """A slot was abandoned after max_attempts: the row of its last attempt ends."""
    return Op("abandoned", {"job": _text(key), "slot": slot, "at": at})


def audit_row(row: tuple[Any, ...]) -> AuditRow:
    """An `AuditRow` from ``SELECT id, <COLUMNS but run_id>``."""
    utc = timezone.utc

    def when(value: Optional[datetime]) -> Optional[datetime]:
        return None if value is None else value.astimezone(utc)

    return AuditRow(
        id=row[0],
        job=row[1],
        slot=row[2].astimezone(utc),
        attempt=row[3],
        fencing_token=row[4],
        holder=row[5],
        runner_id=row[6],
        status=row[7],
        started_at=when(row[8]),
        finished_at=when(row[9]),
        duration=row[10],
        error_type=row[11],
        traceback=row[12],
        kind=row[13],
        trigger_id=row[14],
    )


def record(row: AuditRow) -> Optional[RunRecord]:
    """The `RunRecord` of a row that a run's owner ended; None for any other row."""
    if row.finished_at is None or row.started_at is None or row.attempt is None:
        return None
    try:
        status = RunOutcome(row.status)
    except ValueError:
        return None
    return RunRecord(
        key=row.job,
        slot=row.slot,
        attempt=row.attempt,
        fencing_token=cast(int, row.fencing_token),
        holder=row.holder or "",
        runner_id=row.runner_id or "",
        status=status,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error_type=row.error_type,
        traceback=row.traceback,
        kind=RunKind.MANUAL if row.kind == RunKind.MANUAL else RunKind.SCHEDULED,
        trigger_id=row.trigger_id,
    )


def _text(value: str) -> str:
    # PostgreSQL text cannot hold NUL; an exception message can.
    return value.replace("\x00", "\\x00")
