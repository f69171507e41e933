"""The implementation of [`cronlock.exclusive`][cronlock.exclusive] (documented there)."""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from cronlock._redisurl import client_from_url
from cronlock._validate import Seconds, check_client, check_key, check_prefix, seconds_to_ms
from cronlock.errors import ConfigurationError, LockNotAcquired
from cronlock.lock._redislock import RedisLock

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    P = ParamSpec("P")

logger = logging.getLogger(__name__)

__all__ = ["configure", "exclusive"]

R = TypeVar("R")

URL_VARIABLES = ("CRONLOCK_REDIS_URL", "REDIS_URL")
ON_LOCKED = ("skip", "raise")

_lock = threading.Lock()
_configured: Optional[Any] = None
_from_env: Optional[tuple[str, Any]] = None


def configure(client: Optional[Any] = None) -> None:
    """Set the default client for [`exclusive`][cronlock.exclusive.exclusive] (``None`` forgets it).

    Args:
        client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``.
    """
    global _configured  # noqa: PLW0603 - a process-wide default is the point
    if client is not None:
        check_client(client)
    with _lock:
        _configured = client


def default_client() -> Any:
    """The configured client, else one from the environment; ConfigurationError if none."""
    global _from_env  # noqa: PLW0603
    with _lock:
        if _configured is not None:
            return _configured
        for name in URL_VARIABLES:
            url = os.environ.get(name)
            if url:
                if _from_env is None or _from_env[0] != url:
                    _from_env = (url, client_from_url(url))
                return _from_env[1]
    raise ConfigurationError(
        "no Redis client for cronlock: pass client=..., call cronlock.configure(client=...), "
        "or set CRONLOCK_REDIS_URL or REDIS_URL"
    )


def exclusive(
    key: str,
    ttl: Seconds,
    *,
    client: Optional[Any] = None,
    wait: Optional[Seconds] = None,
    renew: bool = True,
    on_locked: str = "skip",
    prefix: str = "cronlock",
) -> Callable[[Callable[P, R]], Callable[P, Optional[R]]]:
    """Decorate a function so it runs only while holding the lock ``key``.

    Guarantee: while a call holds the lock (renewed every ``ttl / 3`` by default), no
    other call with the same key and prefix runs, in any process using the same Redis.

    Args:
        key: the lock's name (1-256 printable characters, no braces).
        ttl: the lease in seconds; with ``renew`` (default) it only bounds how long a
            crashed process keeps others out.
        client: the Redis client; default: see the module docstring.
        wait: ``None``: do not wait; seconds: wait that long for the lock.
        renew: extend the lease while the function runs.
        on_locked: ``"skip"`` (return None and log at INFO: in a fleet, another replica
            running it is normal) or ``"raise"``
            ([`LockNotAcquired`][cronlock.errors.LockNotAcquired]).
        prefix: namespace of the Redis keys.

    Raises:
        ConfigurationError, TypeError: at decoration, for bad arguments.
        LockLost: the function returned, but the lock was lost while it ran.

    Every argument is checked when decorating; the client is looked up on each call.
    """
    check_key(key)
    check_prefix(prefix)
    seconds_to_ms(ttl, "ttl")
    if wait is not None:
        seconds_to_ms(wait, "wait", allow_zero=True)
    if on_locked not in ON_LOCKED:
        raise ConfigurationError(f"on_locked must be 'skip' or 'raise'; got {on_locked!r}")
    if not isinstance(renew, bool):
        raise TypeError(f"renew must be True or False; got {renew!r}")
    if client is not None:
        check_client(client)

    def decorate(func: Callable[P, R]) -> Callable[P, Optional[R]]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Optional[R]:
            lock = RedisLock(
                client if client is not None else default_client(),
                key,
                ttl,
                wait=wait,
                renew=renew,
                prefix=prefix,
            )
            try:
                lock.acquire()
            except LockNotAcquired:
                if on_locked == "raise":
                    raise
                logger.info("cronlock: skipped %s: lock %r is held elsewhere", _name(func), key)
                return None
            try:
                result = func(*args, **kwargs)
            except BaseException:
                lock.__exit__(*sys.exc_info())
                raise
            lock.__exit__(None, None, None)
            return result

        return wrapper

    return decorate


def _name(func: Callable[..., Any]) -> str:
    return getattr(func, "__qualname__", None) or repr(func)
