"""``@exclusive``: run a function on one process cluster-wide at a time; ``configure``.

Example:
    ```python
    cronlock.configure(client=redis.Redis.from_url("redis://localhost:6379/0"))

    @exclusive("nightly-import", ttl=600)
    def nightly_import() -> None:
        ...

    nightly_import()   # runs here, or returns None (INFO log) if running elsewhere
    ```

The lock lives on, in order: the ``client=``, ``store=`` or ``store_url=`` argument (at
most one), the client or store given to [`configure`][cronlock.exclusive.configure], or
the store named by ``$CRONLOCK_STORE_URL`` (else ``$CRONLOCK_REDIS_URL``, else
``$REDIS_URL``; any URL [`from_url`][cronlock.stores.from_url] takes), opened on the first
call that needs it (never at import or decoration time) and shared by every decorated
function. A front end, not part of the lock layer: it picks a store, the lock does not.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

from cronlock._validate import Seconds, check_client, check_key, check_prefix, seconds_to_ms
from cronlock.errors import ConfigurationError, LockNotAcquired
from cronlock.lock import LeaseLock, RedisLock
from cronlock.stores import RedisStore, Store, as_store, from_url, store_lock

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    P = ParamSpec("P")

logger = logging.getLogger(__name__)

__all__ = ["configure", "default_client", "default_store", "exclusive"]

R = TypeVar("R")

URL_VARIABLES = ("CRONLOCK_STORE_URL", "CRONLOCK_REDIS_URL", "REDIS_URL")
ON_LOCKED = ("skip", "raise")
DEFAULT_PREFIX = "cronlock"

_lock = threading.Lock()
_configured: Optional[Any] = None  # a redis-py client or a Store
_opened: dict[tuple[str, str], Store] = {}  # (url, prefix) -> the store it names


def _check_store(store: Any) -> Store:
    if isinstance(store, RedisStore) or all(
        hasattr(store, name) for name in ("claim_slots", "errors", "prefix")
    ):
        return as_store(store)
    raise TypeError(f"store must be a cronlock store (RedisStore, SqliteStore, ...); got {store!r}")


def configure(client: Optional[Any] = None, *, store: Optional[Any] = None) -> None:
    """Set the default client or store for [`exclusive`][cronlock.exclusive.exclusive].

    Args:
        client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``.
        store: a store (``RedisStore``, ``SqliteStore``, ``PostgresStore``); its prefix is
            the locks' prefix. Both ``None`` forget the default.
    """
    global _configured  # noqa: PLW0603 - a process-wide default is the point
    if client is not None and store is not None:
        raise ConfigurationError("configure() takes client= or store=, not both")
    if client is not None:
        check_client(client)
    if store is not None:
        _check_store(store)
    with _lock:
        _configured = client if client is not None else store


def _opened_store(url: str, prefix: str) -> Store:
    """The store ``url`` names, built once per process and prefix."""
    if not isinstance(url, str):
        raise TypeError(f"a store URL must be a str; got {url!r}")
    with _lock:
        store = _opened.get((url, prefix))
        if store is None:
            store = _opened[(url, prefix)] = from_url(url, prefix=prefix)
        return store


def default_store(prefix: str = DEFAULT_PREFIX) -> Any:
    """The configured client or store, else the store of the environment's URL.

    A client is returned as it is; a URL is opened with ``prefix``.

    Raises:
        ConfigurationError: none is configured and no URL variable is set.
    """
    with _lock:
        configured = _configured
    if configured is not None:
        return configured
    for name in URL_VARIABLES:
        url = os.environ.get(name)
        if url:
            return _opened_store(url, prefix)
    raise ConfigurationError(
        "no store for cronlock's locks: pass client=, store= or store_url=, call "
        "cronlock.configure(client=... or store=...), or set CRONLOCK_STORE_URL, "
        "CRONLOCK_REDIS_URL or REDIS_URL"
    )


def default_client() -> Any:
    """The redis-py client of [`default_store`][cronlock.exclusive.default_store].

    Raises:
        ConfigurationError: there is none, or the default store is not Redis.
    """
    found = default_store()
    if isinstance(found, RedisStore):
        return found.client
    if _is_store(found):
        raise ConfigurationError(f"the default store {found!r} is not Redis")
    return found


def _is_store(value: Any) -> bool:
    """A store rather than a redis-py client (clients have no ``claim_slots``)."""
    return hasattr(value, "claim_slots")


def _lock_on(
    target: Any, key: str, ttl: Seconds, prefix: Optional[str], **options: Any
) -> LeaseLock:
    """The lock ``key`` on a client (under ``prefix``) or a store (under its own)."""
    if not _is_store(target):
        return RedisLock(target, key, ttl, prefix=prefix or DEFAULT_PREFIX, **options)
    _same_prefix(target, prefix)
    return store_lock(target, key, ttl, **options)


def _same_prefix(store: Store, prefix: Optional[str]) -> None:
    if prefix is not None and store.prefix != prefix:
        raise ConfigurationError(
            f"prefix={prefix!r} differs from the store's prefix {store.prefix!r}"
        )


def exclusive(
    key: str,
    ttl: Seconds,
    *,
    client: Optional[Any] = None,
    store: Optional[Any] = None,
    store_url: Optional[str] = None,
    wait: Optional[Seconds] = None,
    renew: bool = True,
    on_locked: str = "skip",
    prefix: Optional[str] = None,
) -> Callable[[Callable[P, R]], Callable[P, Optional[R]]]:
    """Decorate a function so it runs only while holding the lock ``key``.

    Guarantee: while a call holds the lock (renewed every ``ttl / 3`` by default), no
    other call with the same key and prefix runs, in any process using the same store.

    Args:
        key: the lock's name (1-256 printable characters, no braces).
        ttl: the lease in seconds; with ``renew`` (default) it only bounds how long a
            crashed process keeps others out.
        client: a redis-py client to lock on.
        store: a store to lock on (``RedisStore``, ``SqliteStore``, ``PostgresStore``).
        store_url: a store URL (``redis://``, ``postgresql://``, ``sqlite:///...``),
            built when decorating (a bad URL fails there; nothing connects before the
            first call) and shared by every function naming it. At most one of
            ``client``, ``store`` and ``store_url``; none: see the module docstring.
        wait: ``None``: do not wait; seconds: wait that long for the lock.
        renew: extend the lease while the function runs.
        on_locked: ``"skip"`` (return None and log at INFO: in a fleet, another replica
            running it is normal) or ``"raise"``
            ([`LockNotAcquired`][cronlock.errors.LockNotAcquired]).
        prefix: namespace of the lock (default ``"cronlock"`` for a client or URL; a
            store's own prefix for a store, which a different ``prefix`` contradicts).

    Raises:
        ConfigurationError, TypeError: at decoration, for bad arguments.
        LockLost: the function returned, but the lock was lost while it ran.

    Every argument is checked when decorating; the store is looked up on each call.
    """
    check_key(key)
    if prefix is not None:
        check_prefix(prefix)
    seconds_to_ms(ttl, "ttl")
    if wait is not None:
        seconds_to_ms(wait, "wait", allow_zero=True)
    if on_locked not in ON_LOCKED:
        raise ConfigurationError(f"on_locked must be 'skip' or 'raise'; got {on_locked!r}")
    if not isinstance(renew, bool):
        raise TypeError(f"renew must be True or False; got {renew!r}")
    named = (("client", client), ("store", store), ("store_url", store_url))
    given = [name for name, value in named if value is not None]
    if len(given) > 1:
        raise ConfigurationError(
            f"exclusive() takes one of client=, store=, store_url=; got {' and '.join(given)}"
        )
    if client is not None:
        check_client(client)
    if store is not None:
        store = _check_store(store)
        _same_prefix(store, prefix)
    if store_url is not None:
        # Built now, so a bad URL fails the decoration; nothing connects before a call.
        store = _opened_store(store_url, prefix or DEFAULT_PREFIX)
    fixed = client if client is not None else store

    def target() -> Any:
        return fixed if fixed is not None else default_store(prefix or DEFAULT_PREFIX)

    def decorate(func: Callable[P, R]) -> Callable[P, Optional[R]]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Optional[R]:
            lock = _lock_on(target(), key, ttl, prefix, wait=wait, renew=renew)
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
