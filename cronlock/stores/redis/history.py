"""Run history entries as Redis stores them: one capped stream per job (``P:history:{KEY}``).

The claim, trigger and finish scripts append the entries (see
[`cronlock.history`][cronlock.history] for what each event means); this module reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronlock._scripts import text
from cronlock.stores.entries import entry_from_fields
from cronlock.stores.types import HistoryEntry

__all__ = ["parse_entry"]


def parse_entry(key: str, entry_id: Any, raw: Mapping[Any, Any]) -> HistoryEntry:
    """A stream entry (as redis-py returns it, bytes or str) as a `HistoryEntry`; its id
    ``"<server ms>-<seq>"`` says when it was written."""
    eid = text(entry_id)
    fields = {text(k): text(v) for k, v in raw.items()}
    return entry_from_fields(key, eid, int(eid.split("-")[0]), fields)
