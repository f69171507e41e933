"""Dynamic schedules as an operator stores them: `ScheduleSpec`, validated like code.

A schedule names a task (a handler a runner registered with ``@runner.task(name)``);
[`Admin.add_schedule`][cronlock.admin.Admin.add_schedule] stores it, every runner with
the task turns it into a job (see `cronlock.runner.dynamic`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from cronlock._validate import check_key
from cronlock.context import ms_to_datetime
from cronlock.errors import ConfigurationError
from cronlock.options import DYNAMIC_OPTIONS, RUNNER_DEFAULTS, check_option_names, parse_options
from cronlock.schedules import CronSchedule, IntervalSchedule, Schedule

__all__ = ["SCHEDULE_OPTIONS", "ScheduleSpec"]

#: Job options a dynamic schedule may set (``key`` is the schedule id; ``payload`` is its own).
SCHEDULE_OPTIONS = DYNAMIC_OPTIONS


@dataclass(frozen=True)
class ScheduleSpec:
    """One dynamic schedule, as stored in Redis.

    Attributes:
        id: the schedule id, also the job key of its runs (history, pause, trigger).
        task: the task name a runner registered with ``@runner.task(name)``.
        cron: a cron expression (or None), evaluated in ``timezone``.
        interval: seconds between runs on the UTC epoch grid (or None).
        timezone: for ``cron``.
        payload: any JSON value; the handler's ``ctx.payload``.
        options: job options (``ttl``, ``overlap``, ``max_attempts``, ``catch_up``,
            ``jitter``, ``retries``, ``retry_backoff``); unset ones take the runner's
            defaults.
        created: when it was added; ``created_by``: ``"host:pid"`` of who added it.
    """

    id: str
    task: str
    cron: Optional[str] = None
    interval: Optional[float] = None
    timezone: str = "UTC"
    payload: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    created: Optional[datetime] = None
    created_by: str = ""

    def schedule(self) -> Schedule:
        """The schedule this spec describes (ConfigurationError/TypeError if invalid)."""
        if (self.cron is None) == (self.interval is None):
            raise ConfigurationError(
                f"schedule {self.id!r} needs exactly one of cron=... or interval=...; "
                f"got cron={self.cron!r}, interval={self.interval!r}"
            )
        if self.cron is not None:
            return CronSchedule(self.cron, timezone=self.timezone, hash_id=self.id)
        return IntervalSchedule(self.interval)  # type: ignore[arg-type]

    def describe(self) -> str:
        """The schedule in words, or why it is invalid."""
        try:
            return self.schedule().describe()
        except (ConfigurationError, TypeError) as error:
            return f"invalid: {error}"

    def validate(self, defaults: Optional[dict[str, Any]] = None) -> None:
        """Raise what code registration would raise for the same schedule and options."""
        check_key(self.id, "schedule id")
        check_key(self.task, "task name")
        check_option_names(self.options, where=f"schedule {self.id!r}", known=DYNAMIC_OPTIONS)
        parse_options(self.id, self.schedule(), self.options, defaults or RUNNER_DEFAULTS)
        try:
            json.dumps(self.payload)
        except (TypeError, ValueError) as error:
            raise ConfigurationError(
                f"payload of schedule {self.id!r} must be JSON-serialisable: {error}"
            ) from None

    def to_json(self) -> str:
        """The stored form (sorted keys, so equal specs store equal text)."""
        return json.dumps(
            {
                "id": self.id,
                "task": self.task,
                "cron": self.cron,
                "interval": self.interval,
                "timezone": self.timezone,
                "payload": self.payload,
                "options": self.options,
                "created": None if self.created is None else round(self.created.timestamp() * 1000),
                "created_by": self.created_by,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, raw: str) -> ScheduleSpec:
        """Parse the stored form; ConfigurationError when it is not a spec we wrote."""
        try:
            d = json.loads(raw)
            return cls(
                id=str(d["id"]),
                task=str(d["task"]),
                cron=d.get("cron"),
                interval=d.get("interval"),
                timezone=d.get("timezone") or "UTC",
                payload=d.get("payload"),
                options=dict(d.get("options") or {}),
                created=None if d.get("created") is None else ms_to_datetime(d["created"]),
                created_by=str(d.get("created_by", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigurationError(
                f"not a cronlock schedule spec: {raw[:80]!r} ({error})"
            ) from None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields plus the schedule in words."""
        d: dict[str, Any] = json.loads(self.to_json())
        d["created"] = None if self.created is None else self.created.isoformat()
        d["schedule"] = self.describe()
        return d
