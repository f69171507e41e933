"""History entries from their stored fields, the same for every store.

Every store writes an entry as the fields the claim scripts name (``event``, ``slot``,
``attempt``, ``fence`` ... all strings); this turns them into a
[`HistoryEntry`][cronlock.stores.types.HistoryEntry].
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Optional

from cronlock.context import ms_to_datetime
from cronlock.stores.types import HistoryEntry

__all__ = ["entry_from_fields"]


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


def entry_from_fields(key: str, entry_id: str, at_ms: int, f: Mapping[str, str]) -> HistoryEntry:
    """The entry ``entry_id`` of job ``key``, written at ``at_ms`` (the store's clock)."""
    duration_ms = _int(f.get("duration_ms"))
    return HistoryEntry(
        id=entry_id,
        at=ms_to_datetime(at_ms),
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
        fields=dict(f),
    )
