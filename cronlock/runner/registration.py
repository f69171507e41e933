"""The decorator forms of registration: ``cron``, ``interval``, ``at``, ``every``, ``task``.

Each builds a schedule and calls ``add_job``; [`CronRunner`][cronlock.runner.CronRunner]
provides ``add_job``, ``clock`` and ``tasks``, which is all these need of it.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from cronlock._every import Every
from cronlock._validate import check_key
from cronlock.clock import Clock
from cronlock.job import Job, check_option_names, default_key
from cronlock.runner.dynamic import TaskRegistry
from cronlock.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

F = TypeVar("F", bound=Callable[..., Any])


class Registration:
    """Decorators over ``add_job`` (the base of [`CronRunner`][cronlock.runner.CronRunner])."""

    clock: Clock
    tasks: TaskRegistry

    def add_job(self, fn: Callable[..., Any], schedule: Schedule, **options: Any) -> Job:
        raise NotImplementedError

    def cron(
        self, expression: str, *, timezone: str = "UTC", dst_fold: str = "once", **options: Any
    ) -> Callable[[F], F]:
        """Decorator: run the function at each time a cron expression matches.

        ``H`` fields are hashed on the job key (``key=``, else ``module.qualname``), so
        every replica derives the same minute. The function is returned unchanged.
        """
        CronSchedule(expression, timezone=timezone, dst_fold=dst_fold, hash_id="validate")

        def schedule_for(key: str) -> Schedule:
            return CronSchedule(expression, timezone=timezone, dst_fold=dst_fold, hash_id=key)

        return self._decorator(schedule_for, options)

    def interval(
        self,
        seconds: Any = 0,
        *,
        minutes: float = 0,
        hours: float = 0,
        offset: Any = 0,
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run every ``seconds + minutes + hours`` on the UTC epoch grid.

        Slots are ``k * period + offset`` since the epoch, so every replica agrees on them
        whenever it started.
        """
        schedule = IntervalSchedule.from_parts(seconds, minutes=minutes, hours=hours, offset=offset)
        return self._decorator(lambda key: schedule, options)

    def at(self, when: Any, **options: Any) -> Callable[[F], F]:
        """Decorator: run once, cluster-wide, at ``when`` (aware datetime or ISO-8601)."""
        schedule = OnceSchedule(when)
        return self._decorator(lambda key: schedule, options)

    def every(self, interval: int = 1) -> Every:
        """The ``schedule`` library's DSL: ``runner.every(10).minutes.do(fn)``."""

        def register(
            schedule: Schedule,
            fn: Callable[..., Any],
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
            tags: Any,
        ) -> Job:
            return self.add_job(fn, schedule, args=args, kwargs=kwargs, tags=tags)

        return Every(interval, register, clock=self.clock.time)

    def task(self, name: str) -> Callable[[F], F]:
        """Decorator: register a handler by name, for schedules added at runtime.

        Operators give the task schedules with
        [`cronlock.Admin.add_schedule`][cronlock.admin.Admin.add_schedule] (or ``cronlock schedule
        add``); every runner that has the task picks them up within ``poll_interval`` (at once
        through pub/sub while connected). The schedule's JSON payload is ``ctx.payload``. See
        `cronlock.runner.dynamic`.

        Example:
            ```python
            @runner.task("reindex")
            def reindex(ctx):
                print(ctx.payload)
            ```
        """
        return self.tasks.decorator(name)

    def _decorator(
        self, schedule_for: Callable[[str], Schedule], options: dict[str, Any]
    ) -> Callable[[F], F]:
        check_option_names(options)

        def decorate(fn: F) -> F:
            key = options.get("key")
            key = default_key(fn) if key is None else check_key(key)
            self.add_job(fn, schedule_for(key), **{**options, "key": key})
            return fn

        return decorate
