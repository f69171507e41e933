"""A registered job: its options (validated once, at registration) and its handle."""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Optional

from cronlock._validate import check_key, seconds_to_ms
from cronlock.context import JobContext, ms_to_datetime
from cronlock.errors import ConfigurationError
from cronlock.schedules import Schedule

if TYPE_CHECKING:
    from cronlock.runner import CronRunner

OVERLAP_POLICIES = ("skip", "allow", "replace")
OPTION_NAMES = frozenset(
    {
        "key",
        "ttl",
        "max_attempts",
        "overlap",
        "catch_up",
        "jitter",
        "retries",
        "retry_backoff",
        "timeout",
        "payload",
    }
)
DEFAULT_CATCH_UP_MS = 60_000


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


def check_option_names(options: dict[str, Any], key: Optional[str] = None) -> None:
    """Refuse option names a job does not have, naming them and listing the known ones."""
    unknown = sorted(set(options) - OPTION_NAMES)
    if unknown:
        where = f" for job {key!r}" if key is not None else ""
        raise ConfigurationError(
            f"unknown option(s) {', '.join(map(repr, unknown))}{where}; "
            f"known options: {', '.join(sorted(OPTION_NAMES))}"
        )


def parse_options(
    key: str, schedule: Schedule, options: dict[str, Any], defaults: dict[str, Any]
) -> JobOptions:
    """Validate the keyword options of a registration; unknown names are refused."""
    if options.keys() <= {"key"}:
        # The common case (runner defaults only) is computed once per period: registering
        # 100,000 jobs should not validate the same defaults 100,000 times.
        cache_key = (tuple(sorted(defaults.items())), schedule.period_ms)
        cached = _DEFAULTS_CACHE.get(cache_key)
        if cached is None:
            cached = _parse_options(key, schedule, {}, defaults)  # errors name this job
            if len(_DEFAULTS_CACHE) < 1024:
                _DEFAULTS_CACHE[cache_key] = cached
        return cached
    return _parse_options(key, schedule, options, defaults)


_DEFAULTS_CACHE: dict[tuple[Any, ...], JobOptions] = {}


def _parse_options(
    key: str, schedule: Schedule, options: dict[str, Any], defaults: dict[str, Any]
) -> JobOptions:
    unknown = sorted(set(options) - OPTION_NAMES)
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for job {key!r}; "
            f"known options: {', '.join(sorted(OPTION_NAMES - {'key'}))}"
        )
    merged = {**defaults, **{k: v for k, v in options.items() if v is not None}}
    ttl_ms = seconds_to_ms(merged["ttl"], f"ttl of job {key!r}")
    max_attempts = merged.get("max_attempts", 3)
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigurationError(
            f"max_attempts of job {key!r} must be an int >= 1; got {max_attempts!r}"
        )
    overlap = merged.get("overlap", "skip")
    if overlap not in OVERLAP_POLICIES:
        raise ConfigurationError(
            f"overlap of job {key!r} must be one of {', '.join(OVERLAP_POLICIES)}; got {overlap!r}"
        )
    if "catch_up" in merged:
        catch_up_ms = seconds_to_ms(merged["catch_up"], f"catch_up of job {key!r}", allow_zero=True)
    else:
        period = schedule.period_ms
        catch_up_ms = min(period, DEFAULT_CATCH_UP_MS) if period else DEFAULT_CATCH_UP_MS
    jitter_ms = seconds_to_ms(merged.get("jitter", 0), f"jitter of job {key!r}", allow_zero=True)
    retries = merged.get("retries", 0)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(f"retries of job {key!r} must be an int >= 0; got {retries!r}")
    backoff_ms = seconds_to_ms(
        merged.get("retry_backoff", 1.0), f"retry_backoff of job {key!r}", allow_zero=True
    )
    timeout = merged.get("timeout")
    timeout_ms = 0 if timeout is None else seconds_to_ms(timeout, f"timeout of job {key!r}")
    return JobOptions(
        ttl_ms=ttl_ms,
        max_attempts=max_attempts,
        overlap=overlap,
        catch_up_ms=catch_up_ms,
        jitter_ms=jitter_ms,
        retries=retries,
        retry_backoff_ms=backoff_ms,
        payload=merged.get("payload"),
        timeout_ms=timeout_ms,
    )


def default_key(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a function: the same in every replica of one codebase."""
    module = getattr(fn, "__module__", None) or "unknown"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not name:
        raise ConfigurationError(f"cannot derive a job key from {fn!r}: pass key=...")
    return check_key(f"{module}.{name}")


def make_caller(
    fn: Any, args: tuple[Any, ...] = (), kwargs: Optional[dict[str, Any]] = None
) -> Callable[[JobContext], Any]:
    """Adapt a handler to ``call(ctx)``: it takes zero arguments or one ``JobContext``."""
    if not callable(fn):
        raise ConfigurationError(f"a job handler must be callable; got {fn!r}")
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


def _required_positional(fn: Any) -> int:
    """How many positional arguments ``fn`` requires.

    Plain functions and bound methods are read from their code object (registering
    100,000 jobs should not pay ``inspect.signature`` 100,000 times); anything else
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


class Job:
    """The handle of a registered job: ``start()``, ``stop()``, ``destroy()``, ``next_run``."""

    def __init__(
        self,
        runner: CronRunner,
        key: str,
        *,
        fn: Callable[..., Any],
        call: Callable[[JobContext], Any],
        schedule: Schedule,
        options: JobOptions,
    ) -> None:
        self.key = key
        self.func = fn
        self.call = call
        self.schedule = schedule
        self.options = options
        self._runner = runner
        self.enabled = True
        self.generation = 0  # bumped on stop/destroy: heap entries of older generations are dropped
        self.next_slot_ms: Optional[int] = None
        self.tags: frozenset[Any] = frozenset()

    @property
    def next_run(self) -> Optional[datetime]:
        """When this runner will next try to claim a slot of the job (None if stopped/finished)."""
        if not self.enabled or self.next_slot_ms is None:
            return None
        return ms_to_datetime(self.next_slot_ms)

    def start(self) -> None:
        """Resume scheduling this job in this runner (it starts enabled)."""
        self._runner._enable(self)

    def stop(self) -> None:
        """Stop scheduling this job in this runner; a running handler is not interrupted."""
        self._runner._disable(self)

    def destroy(self) -> None:
        """Stop the job and unregister it, freeing its key for a new registration."""
        self._runner._remove(self)

    def __repr__(self) -> str:
        return f"Job({self.key!r}, {self.schedule.describe()})"
