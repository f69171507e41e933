"""What the management API's request bodies mean, for every web front end.

The Flask blueprint and the Django views answer the same routes with the same JSON;
what a body may hold, and how a schedule is shown, is decided here once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronlock._validate import check_key
from cronlock.errors import ConfigurationError, TriggerRefused
from cronlock.ops.admin import DEFAULT_TRIGGER_EXPIRES_S

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


class Conflict(Exception):
    """A request the API refuses as it stands (409): the message says what would help."""


def trigger_reply(admin: Any, key: str, data: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``POST /api/jobs/<key>/trigger`` ``{"force": false, "expires": seconds}``: 202.

    Raises:
        Conflict: the job is paused and ``force`` is not set (nothing is queued).
        KeyError: no runner has registered the job.
        TypeError, ConfigurationError: a bad field, named in the message.
    """
    _known(data, {"force", "expires"})
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise TypeError(f"force must be true or false; got {force!r}")
    expires = data.get("expires", DEFAULT_TRIGGER_EXPIRES_S)
    try:
        request_id = admin.trigger(key, force=force, expires=expires)
    except TriggerRefused as error:
        raise Conflict(f'{error} with {{"force": true}}; not triggered') from None
    runners = admin.runners_with(key)
    body: dict[str, Any] = {
        "key": key,
        "request_id": request_id,
        "force": force,
        "expires_in": expires,
        "runners": runners,
    }
    if runners == 0:
        body["warning"] = (
            f"no live runner has job {key!r}: it runs only if one starts within "
            f"{expires} s (then the request expires)"
        )
    return body, 202


def pause_reply(admin: Any, key: str, data: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``POST /api/jobs/<key>/pause`` ``{"force": false}``: 200.

    Raises:
        Conflict: no runner has registered ``key`` and ``force`` is not set (a typo
            would otherwise pause nothing, silently).
    """
    _known(data, {"force"})
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise TypeError(f"force must be true or false; got {force!r}")
    check_key(key)
    if not force and admin.store.registry_entry(key) is None:
        raise Conflict(
            f'no runner has registered job {key!r}: not paused (pass {{"force": true}} to '
            "pause it before it is deployed)"
        )
    admin.pause(key)
    return {"key": key, "paused": True}, 200


def schedule_reply(admin: Any, data: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``POST /api/schedules``: 201 with the schedule, and a warning when no live runner
    has a handler for its task (it would not run, and runners' health would warn)."""
    task, arguments = schedule_request(data)
    spec = admin.add_schedule(task, **arguments)
    body: dict[str, Any] = {"schedule": schedule_dict(spec)}
    if not any(task in runner.tasks for runner in admin.runners()):
        body["warning"] = (
            f"no live runner has a handler for task {task!r}: the schedule is stored but "
            "does not run until one does (@runner.task)"
        )
    return body, 201


def resume_request(data: dict[str, Any]) -> None:
    """``POST /api/jobs/<key>/resume`` takes an empty body; anything else is a 400."""
    _known(data, set())


def _known(data: dict[str, Any], fields: set[str]) -> None:
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigurationError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; known fields: "
            f"{', '.join(sorted(fields))}"
        )
