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

import logging
from typing import Any, Callable, Optional

from cronlock.context import ErrorContext
from cronlock.errors import ConfigurationError
from cronlock.job import Job
from cronlock.ops.schedules import SCHEDULE_OPTIONS, ScheduleSpec
from cronlock.registrar import add_task_handler
from cronlock.runner.host import RunnerHost

__all__ = ["SCHEDULE_OPTIONS", "ScheduleSpec", "TaskRegistry"]

logger = logging.getLogger("cronlock")


class TaskRegistry:
    """A runner's named handlers and the dynamic jobs it built from stored specs."""

    def __init__(self) -> None:
        self._register: Optional[Callable[..., Job]] = None
        self._host: Optional[RunnerHost] = None
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._active: dict[str, tuple[str, Optional[Job]]] = {}  # id -> (spec json, job)
        self.unhandled: dict[str, str] = {}  # schedule id -> task name with no handler here

    def attach(self, register: Callable[..., Job], host: RunnerHost) -> None:
        """Build dynamic jobs with ``register`` (the runner's ``add_job``); report what
        cannot be built to ``host``."""
        self._register = register
        self._host = host

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

    def reconcile(self, stored: dict[str, str]) -> bool:
        """Make the runner's dynamic jobs match ``stored`` (id -> spec JSON); True if changed."""
        register, host = self._register, self._host
        if register is None or host is None:
            raise RuntimeError("TaskRegistry.reconcile before attach()")
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
            self._active[sid] = (raw, self._build(sid, raw, register, host))
            changed = True
        return changed

    def _build(
        self, sid: str, raw: str, register: Callable[..., Job], host: RunnerHost
    ) -> Optional[Job]:
        try:
            spec = ScheduleSpec.from_json(raw)
            handler = self._handlers.get(spec.task)
            if handler is None:
                self.unhandled[sid] = spec.task
                raise ConfigurationError(
                    f"dynamic schedule {sid!r} names task {spec.task!r}, which has no handler "
                    f"in runner {host.runner_id} (registered tasks: "
                    f"{', '.join(sorted(self._handlers)) or 'none'}); it will run on replicas "
                    "that have one"
                )
            options = {k: v for k, v in spec.options.items() if v is not None}
            return register(handler, spec.schedule(), key=sid, payload=spec.payload, **options)
        except (ConfigurationError, TypeError) as error:
            logger.warning("cronlock: %s", error)
            if host.on_error is not None:  # without one, the WARNING above is the report
                host.report(error, ErrorContext(sid, "acquire"))
            return None
