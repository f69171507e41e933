"""One way to turn the frozen result dataclasses into JSON-able dicts (CLI ``--json``, HTTP)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any


def jsonable(obj: Any, *, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A dataclass's fields as a dict: datetimes as ISO-8601 strings, tuples as lists."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if f.name in exclude:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
