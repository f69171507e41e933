"""The one table of job options: their names, defaults and checks.

Every way of registering a job reads this table: the runner's decorators and
`add_job`, the `every()` DSL, the Flask extension, dynamic schedules
(`Admin.add_schedule`, the management API, `cronlock schedule add`), and the runner's
own defaults (`CronRunner(default_ttl=..., max_attempts=..., overlap=...)`, the Flask
`CRONLOCK_DEFAULT_TTL`, `CRONLOCK_MAX_ATTEMPTS`, `CRONLOCK_OVERLAP`). So they accept the
same names, start from the same defaults and refuse the same values with the same
message.

| option | default | checked | who may set it |
|---|---|---|---|
| `key` | the handler's `module.qualname` | a key (no braces) | code |
| `ttl` | 60 s | seconds > 0 | code, runner default, dynamic |
| `heartbeat` | `ttl / 3` | seconds > 0, at most `ttl / 2` | code, dynamic |
| `max_attempts` | 3 | int >= 1 | code, runner default, dynamic |
| `overlap` | `"skip"` | `skip`, `allow` or `replace` | code, runner default, dynamic |
| `catch_up` | one period, at most 60 s | seconds >= 0 | code, dynamic |
| `jitter` | 0 | seconds >= 0 | code, dynamic |
| `retries` | 0 | int >= 0 | code, dynamic |
| `retry_backoff` | 1 s | seconds >= 0 | code, dynamic |
| `timeout` | none | seconds > 0 | code, dynamic |
| `payload` | none | any (JSON for a dynamic schedule, its own field) | code |

Durations are seconds (int or float) or a `timedelta`, kept to the millisecond.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Optional

from cronlock._durations import seconds_to_ms
from cronlock.errors import ConfigurationError
from cronlock.schedules import Schedule

__all__ = [
    "DEFAULT_CATCH_UP_MS",
    "DYNAMIC_OPTIONS",
    "OPTIONS",
    "OPTION_NAMES",
    "OVERLAP_POLICIES",
    "RUNNER_DEFAULTS",
    "JobOption",
    "JobOptions",
    "check_option_names",
    "parse_options",
]

OVERLAP_POLICIES = ("skip", "allow", "replace")
DEFAULT_CATCH_UP_MS = 60_000  # catch_up's ceiling when a job does not set it


@dataclass(frozen=True)
class JobOptions:
    """Per-job settings, in milliseconds where they are durations."""

    ttl_ms: int
    max_attempts: int
    overlap: str
    catch_up_ms: int
    jitter_ms: int
    retries: int
    retry_backoff_ms: int
    payload: Any = field(default=None, compare=False)
    timeout_ms: int = 0  # 0: no timeout
    heartbeat_ms: int = 0  # 0: ttl / 3

    @property
    def renew_every_ms(self) -> float:
        """How often a run renews its lease: ``heartbeat``, else a third of the lease."""
        return self.heartbeat_ms or self.ttl_ms / 3


def _seconds(*, allow_zero: bool) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        return seconds_to_ms(value, name, allow_zero=allow_zero)

    return check


def _int_at_least(least: int) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigurationError(f"{name} must be an int >= {least}; got {value!r}")
        return value

    return check


def _overlap(value: Any, name: str) -> str:
    if value not in OVERLAP_POLICIES:
        raise ConfigurationError(
            f"{name} must be one of {', '.join(OVERLAP_POLICIES)}; got {value!r}"
        )
    return str(value)


def _anything(value: Any, name: str) -> Any:
    return value


@dataclass(frozen=True)
class JobOption:
    """One row of the option table.

    Attributes:
        name: the keyword of every registration call.
        default: the value when neither the call nor the runner sets one; None: the
            option has no value (`timeout`, `payload`) or derives it (`catch_up`, `key`).
        check: `check(value, "ttl of job 'k'")` returns the value as stored in
            [`JobOptions`][cronlock.options.JobOptions]; raises naming the value.
        field: the [`JobOptions`][cronlock.options.JobOptions] attribute it fills
            (None: `key`, which is the job's name, not a setting).
        runner_default: a runner (and the Flask configuration) may set its default.
        dynamic: a dynamic schedule may set it (in its `options`).
        cli_type: the argument type of `cronlock schedule add --NAME` (dynamic ones).
        choices: the values it may take, when they are few.
        help: what it means, in a few words.
    """

    name: str
    default: Any
    check: Callable[[Any, str], Any]
    field: Optional[str]
    runner_default: bool = False
    dynamic: bool = True
    cli_type: Callable[[str], Any] = float
    choices: tuple[str, ...] = ()
    help: str = ""


#: The job options, in the order the documentation lists them.
OPTIONS: tuple[JobOption, ...] = (
    JobOption("key", None, _anything, None, dynamic=False, help="the job's name"),
    JobOption(
        "ttl",
        60,
        _seconds(allow_zero=False),
        "ttl_ms",
        runner_default=True,
        help="lease length, renewed every heartbeat (default ttl/3) while a run lasts",
    ),
    JobOption(
        "heartbeat",
        None,
        _seconds(allow_zero=False),
        "heartbeat_ms",
        help="how often a run renews its lease (default ttl/3; at most ttl/2)",
    ),
    JobOption(
        "max_attempts",
        3,
        _int_at_least(1),
        "max_attempts",
        runner_default=True,
        cli_type=int,
        help="runs of one slot, takeovers included, before it is abandoned",
    ),
    JobOption(
        "overlap",
        "skip",
        _overlap,
        "overlap",
        runner_default=True,
        cli_type=str,
        choices=OVERLAP_POLICIES,
        help="a slot due while the previous run holds its lease: skip it, allow it to start "
        "alongside, or replace: start it and cancel the old run",
    ),
    JobOption(
        "catch_up",
        None,
        _seconds(allow_zero=True),
        "catch_up_ms",
        help="how late a slot may still start (default: one period, at most 60)",
    ),
    JobOption(
        "jitter",
        0,
        _seconds(allow_zero=True),
        "jitter_ms",
        help="wait a random delay up to this before each claim",
    ),
    JobOption(
        "retries",
        0,
        _int_at_least(0),
        "retries",
        cli_type=int,
        help="calls again within the slot after the handler raised",
    ),
    JobOption(
        "retry_backoff",
        1.0,
        _seconds(allow_zero=True),
        "retry_backoff_ms",
        help="the first retry's delay, doubled after each",
    ),
    JobOption(
        "timeout",
        None,
        _seconds(allow_zero=False),
        "timeout_ms",
        help="cancel a run that takes longer",
    ),
    JobOption("payload", None, _anything, "payload", dynamic=False, help="ctx.payload"),
)

_BY_NAME: Mapping[str, JobOption] = MappingProxyType({o.name: o for o in OPTIONS})

#: Every option name a registration call accepts.
OPTION_NAMES = frozenset(_BY_NAME)

#: The options a dynamic schedule may set (`key` is the schedule id; `payload` its own field).
DYNAMIC_OPTIONS = tuple(sorted(o.name for o in OPTIONS if o.dynamic))

#: The defaults a runner starts from (`CronRunner(default_ttl=..., max_attempts=..., overlap=...)`).
RUNNER_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {o.name: o.default for o in OPTIONS if o.runner_default}
)


def check_option_names(
    options: Mapping[str, Any],
    key: Optional[str] = None,
    *,
    where: Optional[str] = None,
    known: Optional[Iterable[str]] = None,
) -> None:
    """Refuse option names a job does not have, naming them and listing the known ones.

    Args:
        options: the keyword options of a call.
        key: the job they are for (named in the message), if known yet.
        where: instead of `key`, what they are for, e.g. `"schedule 's'"`.
        known: the names allowed (default: every option).
    """
    names = OPTION_NAMES if known is None else frozenset(known)
    unknown = sorted(set(options) - names)
    if unknown:
        if where is None and key is not None:
            where = f"job {key!r}"
        target = f" for {where}" if where else ""
        raise ConfigurationError(
            f"unknown option(s) {', '.join(map(repr, unknown))}{target}; "
            f"known options: {', '.join(sorted(names))}"
        )


def parse_options(
    key: str,
    schedule: Schedule,
    options: Mapping[str, Any],
    defaults: Mapping[str, Any] = RUNNER_DEFAULTS,
) -> JobOptions:
    """Validate the keyword options of a registration; unknown names are refused.

    Args:
        key: the job's key (named in every message).
        schedule: its schedule (`catch_up` defaults to one period, at most 60 s).
        options: the options given (None values count as not given; `key` is ignored).
        defaults: the runner's defaults for the `runner_default` options.
    """
    if not options or options.keys() <= _KEY_ONLY:
        # The common case (runner defaults only) is computed once per period: registering
        # 100,000 jobs should not validate the same defaults 100,000 times.
        cache_key = (tuple(defaults.items()), schedule.period_ms)
        cached = _DEFAULTS_CACHE.get(cache_key)
        if cached is None:
            cached = _parse_options(key, schedule, {}, defaults)  # errors name this job
            if len(_DEFAULTS_CACHE) < 1024:
                _DEFAULTS_CACHE[cache_key] = cached
        return cached
    return _parse_options(key, schedule, options, defaults)


_DEFAULTS_CACHE: dict[tuple[Any, ...], JobOptions] = {}
_KEY_ONLY = frozenset({"key"})


def _parse_options(
    key: str, schedule: Schedule, options: Mapping[str, Any], defaults: Mapping[str, Any]
) -> JobOptions:
    check_option_names(options, key)
    values: dict[str, Any] = {}
    for option in OPTIONS:
        if option.field is None:
            continue
        value = options.get(option.name)  # None: not given
        if value is None and option.runner_default:
            value = defaults.get(option.name, option.default)  # a None default is refused
        elif value is None:
            value = option.default
            if value is None:
                values[option.field] = _unset(option.name, schedule)
                continue
        values[option.field] = option.check(value, f"{option.name} of job {key!r}")
    heartbeat_ms, ttl_ms = values["heartbeat_ms"], values["ttl_ms"]
    if heartbeat_ms * 2 > ttl_ms:
        # A renewal that fails once must still leave time for another within the lease.
        raise ConfigurationError(
            f"heartbeat of job {key!r} must be at most half its ttl ({ttl_ms / 1000:g} s), "
            f"so a failed renewal can be retried before the lease lapses; "
            f"got {options.get('heartbeat')!r}"
        )
    return JobOptions(**values)


def _unset(name: str, schedule: Schedule) -> Any:
    """The stored value of an option without a value."""
    if name == "catch_up":
        period = schedule.period_ms
        return min(period, DEFAULT_CATCH_UP_MS) if period else DEFAULT_CATCH_UP_MS
    if name in ("timeout", "heartbeat"):
        return 0  # no timeout; renew every ttl / 3
    return None  # payload
