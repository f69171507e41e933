"""What the management API's request bodies mean, for every web front end.

The Flask blueprint and the Django views answer the same routes with the same JSON;
what a body may hold, and how a schedule is shown, is decided here once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronlock.errors import ConfigurationError

#: Fields of a POST /api/schedules body besides ``task`` and ``options``.
SCHEDULE_FIELDS = frozenset({"cron", "interval", "timezone", "payload", "schedule_id"})


def schedule_request(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(task, keyword arguments of Admin.add_schedule)`` from a request body.

    Raises:
        TypeError: ``task`` is not a string or ``options`` not an object.
        ConfigurationError: a field the API does not know, named in the message.
    """
    fields = dict(data)
    task = fields.pop("task", None)
    if not isinstance(task, str):
        raise TypeError(f"task must be a string (a task name); got {task!r}")
    options = fields.pop("options", {}) or {}
    if not isinstance(options, dict):
        raise TypeError(f"options must be an object; got {options!r}")
    unknown = sorted(set(fields) - SCHEDULE_FIELDS)
    if unknown:
        raise ConfigurationError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; known fields: "
            f"task, {', '.join(sorted(SCHEDULE_FIELDS))}, options"
        )
    return task, {**fields, **options}


def schedule_dict(spec: Any) -> dict[str, Any]:
    """A schedule as JSON: its fields, datetimes in ISO 8601."""
    out = dict(spec.__dict__) if not hasattr(spec, "as_dict") else spec.as_dict()
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in out.items()}
