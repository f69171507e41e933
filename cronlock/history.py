"""Run history: reading it, and what each event means.

The public path of `cronlock.ops.history`, where it is defined.
"""

from __future__ import annotations

from cronlock.ops.history import EVENTS, HistoryEntry, check_limit, parse_entry, read_history

__all__ = ["EVENTS", "HistoryEntry", "check_limit", "parse_entry", "read_history"]
