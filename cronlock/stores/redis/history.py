"""Run history entries as Redis stores them: one capped stream per job (``P:history:{KEY}``).

The claim, trigger and finish scripts append the entries (see
[`cronlock.history`][cronlock.history] for what each event means); this module reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Optional

from cronlock._scripts import text
from cronlock.context import ms_to_datetime
from cronlock.stores.types import HistoryEntry

__all__ = ["parse_entry"]


def _int(value: Optional[str]) -> Optional[int]:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _when(value: Optional[str]) -> Optional[datetime]:
    ms = _int(value)
    return None if ms is None else ms_to_datetime(ms)


def parse_entry(key: str, entry_id: Any, raw: Mapping[Any, Any]) -> HistoryEntry:
    """A stream entry (as redis-py returns it, bytes or str) as a `HistoryEntry`."""
    f = {text(k): text(v) for k, v in raw.items()}
    eid = text(entry_id)
    duration_ms = _int(f.get("duration_ms"))
    return HistoryEntry(
        id=eid,
        at=ms_to_datetime(int(eid.split("-")[0])),
        key=key,
        event=f.get("event", ""),
        kind=f.get("kind") or "scheduled",
        slot=_when(f.get("slot")),
        attempt=_int(f.get("attempt")),
        fencing_token=_int(f.get("fence")),
        holder=f.get("holder", ""),
        started=_when(f.get("started")),
        finished=_when(f.get("finished")),
        duration=None if duration_ms is None else duration_ms / 1000,
        error_type=f.get("error_type") or None,
        traceback=f.get("traceback") or None,
        trigger_id=f.get("trigger") or None,
        reason=f.get("reason") or None,
        fields=f,
    )
