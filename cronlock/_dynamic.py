"""Dynamic schedules: handlers registered in code by name, scheduled at runtime.

A runner registers handlers with ``@runner.task("reindex")``. An operator adds a
schedule for that task name (``Admin.add_schedule`` or ``cronlock schedule add``); it
is stored as JSON in the hash ``P:schedules`` (id -> spec) and ``P:schedules:version``
is bumped and announced on the ``P:events`` channel. Every runner reconciles its
dynamic jobs with the stored specs when it hears of a change, and at least every
``poll_interval`` (one ``GET`` of the version while nothing changes).

Each schedule becomes an ordinary job of every runner that has the task, keyed by the
schedule id, so the claim path, history, pause and trigger work on it unchanged. A
runner without a handler for the task reports it once per schedule (a WARNING, and
``on_error`` with a [`ConfigurationError`][cronlock.errors.ConfigurationError], phase ``"acquire"``)
and lists it in ``runner.tasks.unhandled`` and ``runner.health().warnings``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Optional

from cronlock._validate import check_key
from cronlock.context import ErrorContext, ms_to_datetime
from cronlock.errors import ConfigurationError
from cronlock.job import Job
from cronlock.options import DYNAMIC_OPTIONS, RUNNER_DEFAULTS, check_option_names, parse_options
from cronlock.registrar import add_task_handler
from cronlock.schedules import CronSchedule, IntervalSchedule, Schedule

if TYPE_CHECKING:
    from cronlock.runner import CronRunner

logger = logging.getLogger("cronlock")

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


class TaskRegistry:
    """A runner's named handlers and the dynamic jobs it built from stored specs."""

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._active: dict[str, tuple[str, Optional[Job]]] = {}  # id -> (spec json, job)
        self.unhandled: dict[str, str] = {}  # schedule id -> task name with no handler here

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        """Make `fn` the handler of task `name` (what `@runner.task(name)` ends in).

        Raises ConfigurationError when another handler has the name.
        """
        add_task_handler(self._handlers, name, fn)

    def names(self) -> list[str]:
        return list(self._handlers)

    def task_of(self, job_key: str) -> Optional[str]:
        """The task name of a dynamic job of this runner, else None."""
        active = self._active.get(job_key)
        if active is None:
            return None
        return ScheduleSpec.from_json(active[0]).task

    def reconcile(self, runner: CronRunner, stored: dict[str, str]) -> bool:
        """Make the runner's dynamic jobs match ``stored`` (id -> spec JSON); True if changed."""
        changed = False
        for sid in list(self._active):
            raw, job = self._active[sid]
            if stored.get(sid) != raw:
                if job is not None:
                    job.destroy()
                del self._active[sid]
                self.unhandled.pop(sid, None)
                changed = True
        for sid, raw in sorted(stored.items()):
            if sid in self._active:
                continue
            self._active[sid] = (raw, self._build(runner, sid, raw))
            changed = True
        return changed

    def _build(self, runner: CronRunner, sid: str, raw: str) -> Optional[Job]:
        try:
            spec = ScheduleSpec.from_json(raw)
            handler = self._handlers.get(spec.task)
            if handler is None:
                self.unhandled[sid] = spec.task
                raise ConfigurationError(
                    f"dynamic schedule {sid!r} names task {spec.task!r}, which has no handler "
                    f"in runner {runner.runner_id} (registered tasks: "
                    f"{', '.join(sorted(self._handlers)) or 'none'}); it will run on replicas "
                    "that have one"
                )
            options = {k: v for k, v in spec.options.items() if v is not None}
            return runner.add_job(
                handler, spec.schedule(), key=sid, payload=spec.payload, **options
            )
        except (ConfigurationError, TypeError) as error:
            logger.warning("cronlock: %s", error)
            if runner.on_error is not None:  # without one, the WARNING above is the report
                runner._report(error, ErrorContext(sid, "acquire"))
            return None
