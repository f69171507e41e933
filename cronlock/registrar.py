"""The one registrar: every registration call, written once, for the runner and the Flask extension.

A registration call (`@cron`, `@interval`, `@at`, `every(...).do`, `add_job`, `@task`,
`register(obj)` of [marked methods][cronlock.marks])
checks what it is given at once, before any Redis work, and turns it into a
[`JobSpec`][cronlock.registrar.JobSpec]: the job's key, schedule, handler and the
options it set. A host receives the spec through `add_spec`:

* [`CronRunner`][cronlock.runner.CronRunner] makes it a job at once (defaults from the
  runner's `default_ttl`, `max_attempts`, `overlap`);
* the Flask extension keeps it and hands it to the runner of every app it is
  initialised on, now and later, with the handler inside the app's context and a cron
  without `timezone=` in the app's `CRONLOCK_TIMEZONE`.

So both accept the same arguments, refuse the same mistakes with the same messages
(the option table is [`cronlock.options`][cronlock.options]), and a handle means the
same thing.
"""

from __future__ import annotations

import abc
import inspect
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Generic, Optional, TypeVar

from cronlock._validate import check_key
from cronlock.clock import SystemClock
from cronlock.context import JobContext
from cronlock.errors import ConfigurationError
from cronlock.marks import (
    Mark,
    check_not_a_method,
    cron_mark,
    interval_mark,
    marked_members,
    once_mark,
)
from cronlock.options import JobOptions, check_option_names, parse_options
from cronlock.schedules import Schedule
from cronlock.schedules._every import Every

__all__ = [
    "JobSpec",
    "Registrar",
    "add_task_handler",
    "default_key",
    "duplicate_key_error",
    "make_caller",
]

F = TypeVar("F", bound=Callable[..., Any])
HandleT = TypeVar("HandleT")

_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})
_NO_TAGS: frozenset[Any] = frozenset()


def default_key(fn: Callable[..., Any]) -> str:
    """`module.qualname` of a function: the same in every replica of one codebase."""
    module = getattr(fn, "__module__", None) or "unknown"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not name:
        raise ConfigurationError(f"cannot derive a job key from {fn!r}: pass key=...")
    return check_key(f"{module}.{name}")


def make_caller(
    fn: Any, args: tuple[Any, ...] = (), kwargs: Optional[dict[str, Any]] = None
) -> Callable[[JobContext], Any]:
    """Adapt a handler to `call(ctx)`: it takes zero arguments or one `JobContext`.

    A function defined in a class body with a `self` is refused (see
    [`check_not_a_method`][cronlock.marks.check_not_a_method]).
    """
    if not callable(fn):
        raise ConfigurationError(f"a job handler must be callable; got {fn!r}")
    check_not_a_method(fn)
    if args or kwargs:
        bound_kwargs = dict(kwargs or {})
        return lambda ctx: fn(*args, **bound_kwargs)
    required = _required_positional(fn)
    # One required positional parameter receives the context; none: called bare.
    if required == 0:
        return lambda ctx: fn()
    if required == 1:
        return fn  # type: ignore[no-any-return]
    raise ConfigurationError(
        f"handler {fn!r} must take no arguments or one JobContext; it requires {required}"
    )


def duplicate_key_error(key: str, where: str) -> ConfigurationError:
    """The error of a second registration under a taken key, saying how to tell them apart.

    Args:
        key: the key.
        where: the host, e.g. `"in this runner"`.
    """
    return ConfigurationError(
        f"a job with key {key!r} is already registered {where}. A key defaults to the "
        "handler's module.qualname (module.Class.method for runner.register(obj)), so each "
        "registration of one function needs its own key=..., e.g. "
        'runner.every(10, key="send-alice").minutes.do(send, "alice") and '
        'runner.every(10, key="send-bob").minutes.do(send, "bob"), or '
        '@runner.interval(60, key="sync-eu"); a second instance of one class: '
        'runner.register(obj, key_prefix="eu")'
    )


def _required_positional(fn: Any) -> int:
    """How many positional arguments `fn` requires.

    Plain functions and bound methods are read from their code object (registering
    100,000 jobs should not pay `inspect.signature` 100,000 times); anything else
    (partials, callable objects, builtins) goes through `inspect.signature`.
    """
    func, bound = (fn.__func__, 1) if isinstance(fn, types.MethodType) else (fn, 0)
    if isinstance(func, types.FunctionType) and not hasattr(func, "__wrapped__"):
        code = func.__code__
        positional = code.co_argcount
        return max(0, positional - len(func.__defaults__ or ()) - bound)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: call them bare
        return 0
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in sig.parameters.values() if p.kind in kinds and p.default is p.empty)


def add_task_handler(handlers: dict[str, Callable[..., Any]], name: str, fn: Any) -> bool:
    """Make `fn` the handler of task `name` in `handlers`; False if it already was.

    The same function registered twice under one name is not an error (an import run
    twice); another function under a taken name is.

    Raises:
        ConfigurationError: another handler has the name.
    """
    known = handlers.get(name)
    if known is fn:
        return False
    if known is not None:
        raise ConfigurationError(f"a handler for task {name!r} is already registered")
    handlers[name] = fn
    return True


@dataclass(frozen=True)
class JobSpec:
    """One registered job, as every host receives it: checked, not yet scheduled.

    Attributes:
        key: the job's name, shared by every replica.
        schedule: when its slots are (a cron without `timezone=` in UTC; see `zoned`).
        fn: the user's function (the handle's `func`).
        call: `fn` adapted to `call(ctx)` (bound `args`/`kwargs`, or the context, or none).
        options: the job options the call set, by name (see `cronlock.options`); the
            host fills in the rest from its defaults.
        tags: tags of the job (`every(...).tag(...)`, `add_job(tags=...)`).
        zoned: for a cron registered without `timezone=`: the schedule in a host's
            default zone (the Flask extension's `CRONLOCK_TIMEZONE`); None otherwise.
    """

    key: str
    schedule: Schedule
    fn: Callable[..., Any]
    call: Callable[[JobContext], Any]
    options: Mapping[str, Any] = field(default_factory=lambda: _NO_OPTIONS)
    tags: frozenset[Any] = _NO_TAGS
    zoned: Optional[Callable[[str], Schedule]] = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.schedule, Schedule):
            raise ConfigurationError(f"schedule must be a cronlock Schedule; got {self.schedule!r}")
        check_key(self.key)
        if self.options:
            check_option_names(self.options, self.key)

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        schedule: Schedule,
        *,
        args: tuple[Any, ...] = (),
        kwargs: Optional[dict[str, Any]] = None,
        tags: Iterable[Any] = (),
        options: Mapping[str, Any] = _NO_OPTIONS,
        zoned: Optional[Callable[[str], Schedule]] = None,
    ) -> JobSpec:
        """The spec of `add_job(fn, schedule, ...)`: handler, schedule and key checked.

        Option values are checked by [`job_options`][cronlock.registrar.JobSpec.job_options],
        against the defaults of the host that adds the job.
        """
        call = make_caller(fn, args, kwargs)
        key = options.get("key")
        if key is None:
            if not isinstance(schedule, Schedule):  # refused before a key is derived
                raise ConfigurationError(f"schedule must be a cronlock Schedule; got {schedule!r}")
            key = default_key(fn)
        if len(options) <= 1 and (not options or "key" in options):
            frozen = _NO_OPTIONS  # the common case: no option but the key
        else:
            frozen = MappingProxyType({k: v for k, v in options.items() if k != "key"})
        # __post_init__ checks the schedule, the key and the option names.
        return cls(key, schedule, fn, call, frozen, frozenset(tags) if tags else _NO_TAGS, zoned)

    def job_options(self, defaults: Optional[Mapping[str, Any]] = None) -> JobOptions:
        """The job's options: those it set, the others from `defaults` (a runner's), then
        the table's. Raises ConfigurationError naming a bad value."""
        if defaults is None:
            return parse_options(self.key, self.schedule, self.options)
        return parse_options(self.key, self.schedule, self.options, defaults)

    def for_host(
        self,
        default_timezone: str,
        wrap: Optional[Callable[[Callable[[JobContext], Any]], Callable[[JobContext], Any]]] = None,
    ) -> JobSpec:
        """This spec as one host runs it: a cron without `timezone=` in `default_timezone`,
        and `call` wrapped by `wrap` (e.g. inside a Flask app's context)."""
        schedule = self.schedule if self.zoned is None else self.zoned(default_timezone)
        call = self.call if wrap is None else wrap(self.call)
        return replace(self, schedule=schedule, call=call, zoned=None)


class Registrar(abc.ABC, Generic[HandleT]):
    """The registration calls, written once; a host implements `add_spec` and `_accept_task`.

    `HandleT` is what a registration returns: a [`Job`][cronlock.job.Job] for a runner;
    for the Flask extension the job of its one app, or None.
    """

    @abc.abstractmethod
    def add_spec(self, spec: JobSpec) -> HandleT:
        """Register the job `spec` describes; every other registration call ends here."""

    @abc.abstractmethod
    def _accept_task(self, name: str, fn: Callable[..., Any]) -> None:
        """Keep `fn` as the handler of dynamic schedules of task `name` (checked already)."""

    def _registration_time(self) -> Callable[[], float]:
        """Epoch seconds now, for `every(...).until(...)`; a runner gives its clock's."""
        return SystemClock().time

    def add_job(
        self,
        fn: Callable[..., Any],
        schedule: Schedule,
        *,
        args: tuple[Any, ...] = (),
        kwargs: Optional[dict[str, Any]] = None,
        tags: Iterable[Any] = (),
        **options: Any,
    ) -> HandleT:
        """Register `fn` to run on `schedule`; the other registration calls use this.

        Options: `key` (default `module.qualname`), `ttl`, `max_attempts`, `overlap`,
        `catch_up`, `jitter`, `retries`, `retry_backoff`, `timeout`, `payload` (see
        docs/concepts.md, "Job options", and [`cronlock.options`][cronlock.options]).
        Raises ConfigurationError (naming the value) for anything invalid, before any
        Redis work.
        """
        spec = JobSpec.build(fn, schedule, args=args, kwargs=kwargs, tags=tags, options=options)
        return self.add_spec(spec)

    def cron(
        self,
        expression: str,
        *,
        timezone: Optional[str] = None,
        dst_fold: str = "once",
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run the function at each time a cron expression matches.

        `timezone` defaults to the host's zone: UTC for a runner, `CRONLOCK_TIMEZONE`
        for the Flask extension. `H` fields are hashed on the job key (`key=`, else
        `module.qualname`), so every replica derives the same minute. The function is
        returned unchanged.
        """
        return self._decorator(cron_mark(expression, timezone, dst_fold, options))

    def interval(
        self,
        seconds: Any = 0,
        *,
        minutes: float = 0,
        hours: float = 0,
        offset: Any = 0,
        **options: Any,
    ) -> Callable[[F], F]:
        """Decorator: run every `seconds + minutes + hours` on the UTC epoch grid.

        Slots are `k * period + offset` since the epoch, so every replica agrees on them
        whenever it started.
        """
        return self._decorator(interval_mark(seconds, minutes, hours, offset, options))

    def at(self, when: Any, **options: Any) -> Callable[[F], F]:
        """Decorator: run once, cluster-wide, at `when` (aware datetime or ISO-8601)."""
        return self._decorator(once_mark(when, options))

    def every(self, interval: Any = 1, **options: Any) -> Every:
        """The `schedule` DSL: `every(10, key="report").minutes.do(fn, *args, **kwargs)`.

        `options` are the job options of every registration call (`key`, `ttl`, ...; an
        unknown name is refused here, a bad value at `.do()`); the arguments of
        `.do(fn, *args, **kwargs)` go to `fn`. The translation into shared slots is in
        `cronlock.schedules._every`.
        """
        check_option_names(options)

        def register(
            schedule: Schedule,
            fn: Callable[..., Any],
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
            tags: Any,
        ) -> HandleT:
            return self.add_job(fn, schedule, args=args, kwargs=kwargs, tags=tags, **options)

        return Every(interval, register, clock=self._registration_time())

    def register(self, target: Any, *, key_prefix: Optional[str] = None) -> list[HandleT]:
        """Register the marked bound methods of an instance, or the marked functions of a
        module (see [`cronlock.marks`][cronlock.marks]); returns their job handles.

        Keys: each marker's `key=`, else `module.Class.method` (`module.function`); with
        `key_prefix`, `key_prefix + "."` and the marker's `key=` or the method's name.
        Every job is checked (schedule, options, handler, keys among themselves) before
        the first is added; a key another registration already took is the usual
        duplicate-key error, raised when that job is reached, so registering the same
        instance twice adds nothing the second time.

        Raises:
            ConfigurationError: nothing in `target` is marked, `target` is a class, or a
                job is invalid (naming it).
        """
        members = marked_members(target)
        if not members:
            raise ConfigurationError(
                f"nothing to register in {target!r}: no function or method of it is marked "
                "with cronlock.cron, cronlock.interval or cronlock.at"
            )
        specs: dict[str, JobSpec] = {}
        for member in members:
            spec = self._spec(member.fn, member.mark, member.key(key_prefix))
            spec.job_options()  # values checked before anything is added
            if spec.key in specs:
                raise ConfigurationError(
                    f"{member.name} of {target!r} and {specs[spec.key].fn!r} would both have "
                    f"the key {spec.key!r}: give the markers distinct key=..."
                )
            specs[spec.key] = spec
        return [self.add_spec(spec) for spec in specs.values()]

    def task(self, name: str) -> Callable[[F], F]:
        """Decorator: register a handler by name, for schedules added at runtime.

        Operators give the task schedules with `Admin.add_schedule` (or `cronlock
        schedule add`, or the management API); every runner that has the task picks
        them up within its `poll_interval` (at once through pub/sub while connected).
        The schedule's JSON payload is `ctx.payload`. See `cronlock.runner.dynamic`.

        Example:
            ```python
            @runner.task("reindex")
            def reindex(ctx):
                print(ctx.payload)
            ```
        """
        check_key(name, "task name")

        def decorate(fn: F) -> F:
            make_caller(fn)  # refuse a bad signature now, not at the first run
            self._accept_task(name, fn)
            return fn

        return decorate

    def _decorator(self, mark: Mark) -> Callable[[F], F]:
        def decorate(fn: F) -> F:
            key = mark.key
            self.add_spec(self._spec(fn, mark, default_key(fn) if key is None else key))
            return fn

        return decorate

    @staticmethod
    def _spec(fn: Callable[..., Any], mark: Mark, key: str) -> JobSpec:
        """The spec of `fn` registered as `mark` says, under `key`."""
        zoned = None if mark.zoned_for is None else mark.zoned_for(key)
        options = {**mark.options, "key": key}
        return JobSpec.build(fn, mark.schedule_for(key), options=options, zoned=zoned)
