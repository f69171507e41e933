"""Markers: schedule methods (or module functions) now, register them on a runner later.

`@runner.interval(...)` registers at once, so it needs the runner at import and cannot
take a method: in a class body there is no instance yet, and the function would be
called with the `JobContext` as `self` (a registration call refuses such a function,
saying so). A marker only notes the registration on the function; `runner.register(obj)`
then registers the marked bound methods of `obj` (or the marked functions of a module),
with everything the decorators have: the same arguments, the same options, the same
checks, the same errors.

```python
import cronlock


class Billing:
    def __init__(self, region: str) -> None:
        self.region = region

    @cronlock.interval(minutes=5, ttl=120)
    def sync(self, ctx: cronlock.JobContext) -> None:
        print(self.region, ctx.slot)

    @cronlock.cron("0 2 * * *", timezone="Europe/Athens", key="nightly")
    def close_day(self) -> None:
        print("closing", self.region)


# later, with a runner: runner.register(Billing("eu"))
```

Keys: the marker's `key=`, else `module.Class.method` (the instance's class, so a
subclass's jobs have their own keys), or `module.function` for a module's functions.
`register(obj, key_prefix="eu")` makes them `eu.method` (`eu.` plus the marker's `key=`
if it has one), for registering several instances of one class. A marker checks its
schedule and options when the class body or module runs, so a mistake fails at import.

The markers are also `cronlock.cron`, `cronlock.interval` and `cronlock.at`; where a
Flask extension is named `cronlock` (as in its docs), import them as
`from cronlock import marks` and write `@marks.interval(...)`. There is no marker for
the `every()` DSL: its `.do(fn, *args)` is the registration itself.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Optional, TypeVar

from cronlock._validate import check_key
from cronlock.errors import ConfigurationError
from cronlock.options import check_option_names, parse_options
from cronlock.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

__all__ = [
    "Mark",
    "Marked",
    "at",
    "check_not_a_method",
    "cron",
    "cron_mark",
    "interval",
    "interval_mark",
    "marked_members",
    "marks_of",
    "once_mark",
]

F = TypeVar("F")

#: The attribute a marker sets on the function: a tuple of `Mark`s.
_ATTRIBUTE = "__cronlock_marks__"
_SELF_NAMES = ("self", "cls")
_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})

Zoned = Optional[Callable[[str], Schedule]]


@dataclass(frozen=True)
class Mark:
    """A registration waiting for a function and a key: a schedule recipe and options.

    The decorators of a runner build one and use it at once; a marker keeps it on the
    function until `register`.

    Attributes:
        schedule_for: the schedule of the job with a given key (a cron's `H` fields are
            hashed on the key).
        options: the job options given (`key` included, if given), names checked.
        zoned_for: for a cron without `timezone=`: the key's schedule in a host's zone
            (the Flask extension's `CRONLOCK_TIMEZONE`); None otherwise.
    """

    schedule_for: Callable[[str], Schedule] = field(compare=False)
    options: Mapping[str, Any] = field(default_factory=lambda: _NO_OPTIONS)
    zoned_for: Optional[Callable[[str], Zoned]] = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_option_names(self.options)

    @property
    def key(self) -> Optional[str]:
        """The `key=` it was given, if any (checked)."""
        key = self.options.get("key")
        return None if key is None else check_key(key)


def cron_mark(
    expression: str, timezone: Optional[str], dst_fold: str, options: Mapping[str, Any]
) -> Mark:
    """The mark of `cron(expression, timezone=..., dst_fold=..., **options)`, checked."""
    check_option_names(options)
    zone = "UTC" if timezone is None else timezone
    CronSchedule(expression, timezone=zone, dst_fold=dst_fold, hash_id="validate")

    def schedule_for(key: str) -> Schedule:
        return CronSchedule(expression, timezone=zone, dst_fold=dst_fold, hash_id=key)

    def zoned_for(key: str) -> Zoned:
        if timezone is not None:
            return None
        return lambda tz: CronSchedule(expression, timezone=tz, dst_fold=dst_fold, hash_id=key)

    return Mark(schedule_for, MappingProxyType(dict(options)), zoned_for)


def interval_mark(
    seconds: Any, minutes: float, hours: float, offset: Any, options: Mapping[str, Any]
) -> Mark:
    """The mark of `interval(seconds, minutes=..., hours=..., offset=..., **options)`."""
    check_option_names(options)
    schedule = IntervalSchedule.from_parts(seconds, minutes=minutes, hours=hours, offset=offset)
    return Mark(lambda key: schedule, MappingProxyType(dict(options)))


def once_mark(when: Any, options: Mapping[str, Any]) -> Mark:
    """The mark of `at(when, **options)`, checked."""
    check_option_names(options)
    schedule = OnceSchedule(when)
    return Mark(lambda key: schedule, MappingProxyType(dict(options)))


def cron(
    expression: str, *, timezone: Optional[str] = None, dst_fold: str = "once", **options: Any
) -> Callable[[F], F]:
    """Mark a method or function to run at each time a cron expression matches.

    The arguments are [`Registrar.cron`][cronlock.registrar.Registrar.cron]'s; nothing
    is registered until `runner.register(obj)`. The function is returned unchanged.
    """
    return _marker(cron_mark(expression, timezone, dst_fold, options))


def interval(
    seconds: Any = 0, *, minutes: float = 0, hours: float = 0, offset: Any = 0, **options: Any
) -> Callable[[F], F]:
    """Mark a method or function to run every `seconds + minutes + hours` (UTC epoch grid).

    The arguments are [`Registrar.interval`][cronlock.registrar.Registrar.interval]'s;
    nothing is registered until `runner.register(obj)`.
    """
    return _marker(interval_mark(seconds, minutes, hours, offset, options))


def at(when: Any, **options: Any) -> Callable[[F], F]:
    """Mark a method or function to run once, cluster-wide, at `when`.

    The arguments are [`Registrar.at`][cronlock.registrar.Registrar.at]'s; nothing is
    registered until `runner.register(obj)`.
    """
    return _marker(once_mark(when, options))


def _marker(mark: Mark) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        func = _function_of(fn)
        if func is None:
            raise ConfigurationError(
                f"a cronlock marker takes a function or method defined with def; got {fn!r}"
            )
        # Option values are checked now (with the table's defaults), so a bad ttl fails
        # at import; the runner's own defaults apply at register.
        parse_options(mark.key or _qualified(func), mark.schedule_for("validate"), mark.options)
        setattr(func, _ATTRIBUTE, (*marks_of(func), mark))
        return fn

    return decorate


def marks_of(fn: Any) -> tuple[Mark, ...]:
    """The marks on a function (or a staticmethod/classmethod/bound method's function)."""
    func = _function_of(fn)
    marks = getattr(func, _ATTRIBUTE, ()) if func is not None else ()
    return marks if isinstance(marks, tuple) else ()


@dataclass(frozen=True)
class Marked:
    """One marked member of a target of `register`: what to call, and its default key.

    Attributes:
        fn: the bound method (or the module's function) the job calls.
        name: the method's (or function's) name.
        default_key: `module.Class.method` or `module.function`.
        mark: one of its marks.
    """

    fn: Callable[..., Any]
    name: str
    default_key: str
    mark: Mark

    def key(self, key_prefix: Optional[str] = None) -> str:
        """The job's key: the mark's `key=` or `default_key`; with `key_prefix`,
        `key_prefix + "."` and the mark's `key=` or the name."""
        if key_prefix is None:
            return check_key(self.mark.key or self.default_key)
        return check_key(f"{check_key(key_prefix, 'key_prefix')}.{self.mark.key or self.name}")


def marked_members(target: Any) -> list[Marked]:
    """The marked bound methods of an instance, or the marked functions of a module.

    A module's functions count where they are defined: a marked function imported into
    another module is not registered with that module too. Methods are looked up along
    the instance's class MRO (an override without a mark has none); descriptors are
    read from the class `__dict__`, so properties are never evaluated.

    Raises:
        ConfigurationError: `target` is a class (its methods need an instance).
    """
    if isinstance(target, types.ModuleType):
        return list(_module_members(target))
    if isinstance(target, type):
        raise ConfigurationError(
            f"register() takes an instance or a module; got the class {target.__qualname__}: "
            f"its methods need self, so register an instance, e.g. runner.register("
            f"{target.__name__}(...))"
        )
    return list(_instance_members(target))


def _module_members(module: types.ModuleType) -> Iterator[Marked]:
    seen: set[int] = set()
    for value in vars(module).values():
        if not isinstance(value, types.FunctionType) or id(value) in seen:
            continue
        if value.__module__ != module.__name__:
            continue
        seen.add(id(value))
        for mark in marks_of(value):
            yield Marked(value, value.__name__, _qualified(value), mark)


def _instance_members(obj: Any) -> Iterator[Marked]:
    cls = type(obj)
    seen: set[str] = set()
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            marks = marks_of(value)
            if not marks:
                continue
            bound = getattr(obj, name)
            for mark in marks:
                yield Marked(bound, name, f"{cls.__module__}.{cls.__qualname__}.{name}", mark)


def _function_of(fn: Any) -> Optional[types.FunctionType]:
    """The plain function behind `fn` (itself, or a static/class/bound method's)."""
    if isinstance(fn, (staticmethod, classmethod, types.MethodType)):
        fn = fn.__func__
    return fn if isinstance(fn, types.FunctionType) else None


def _qualified(fn: types.FunctionType) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def check_not_a_method(fn: Any) -> None:
    """Refuse a function defined in a class body whose first parameter is `self` or `cls`.

    At decoration time the class does not exist yet, so what tells a method apart is its
    `__qualname__` (`Class.method`, `f.<locals>.Class.method`; a function nested in a
    function is `f.<locals>.g`) and its first parameter. Registered as it is, it would
    be called with the `JobContext` as `self`. Bound methods (`obj.sync`) are fine, and
    so is a function in a class body that takes no `self` (it is called bare).

    Raises:
        ConfigurationError: saying what to do instead.
    """
    if not isinstance(fn, types.FunctionType):
        return
    qualname = fn.__qualname__
    owner, dot, name = qualname.rpartition(".")
    if not dot or owner.endswith("<locals>"):
        return
    first = _first_parameter(fn)
    if first not in _SELF_NAMES:
        return
    raise ConfigurationError(
        f"{qualname} is a method (defined in a class body, first parameter {first!r}): "
        f"registered as it is, it would be called with the JobContext as {first}. Mark it "
        "instead with @cronlock.interval(...) (or cronlock.cron, cronlock.at; the same as "
        "cronlock.marks.interval, ...) and register an instance with runner.register(obj), "
        f"or register a bound method: runner.add_job(obj.{name}, schedule, key=...)"
    )


def _first_parameter(fn: types.FunctionType) -> Optional[str]:
    if not hasattr(fn, "__wrapped__"):
        code = fn.__code__
        return code.co_varnames[0] if code.co_argcount else None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return params[0].name if params and params[0].kind in kinds else None
