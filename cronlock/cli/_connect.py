"""Which store the command line names, and the connection to it.

The URL comes from, in this order: ``--store-url`` or ``--redis-url`` (both given and
different: a usage error), ``$CRONLOCK_STORE_URL`` or ``$CRONLOCK_REDIS_URL`` (the same
rule), then ``$REDIS_URL``. A flag beats the environment, as in every CLI: ``REDIS_URL``
is often set for an application's own use and never overrides a cronlock setting. The
``redis`` names take only Redis URLs.

A plain ``redis://`` URL of a Cluster node is detected (one ``INFO cluster``) and opened
as ``RedisCluster``, so every command works on a Cluster whatever URL the operator
pasted; ``?cluster=false`` turns the detection off, ``?cluster=true`` skips it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Optional

from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from cronlock._redisurl import masked, scheme_of, split_cluster_flag
from cronlock.cli._common import EXIT_UNAVAILABLE, EXIT_USAGE, CliError
from cronlock.errors import ConfigurationError
from cronlock.stores import RedisStore, Store, from_url
from cronlock.stores.urls import POSTGRES_SCHEMES, is_redis_url

#: Schemes of stores that are not Redis (given to a ``redis`` name: use the store name).
OTHER_STORE_SCHEMES = (*POSTGRES_SCHEMES, "sqlite")

__all__ = ["close_store", "given_store_url", "open_store", "store_url"]

#: (flag name, argparse dest) then (environment variable, ...), each pair one level.
_LEVELS = (
    (("--store-url", "store_url"), ("--redis-url", "redis_url")),
    (("CRONLOCK_STORE_URL", None), ("CRONLOCK_REDIS_URL", None)),
    (("REDIS_URL", None),),
)


def _value(args: argparse.Namespace, name: str, dest: Optional[str]) -> Optional[str]:
    return getattr(args, dest, None) if dest is not None else os.environ.get(name)


def given_store_url(args: argparse.Namespace) -> Optional[tuple[str, str]]:
    """The store URL and where it came from (``"--store-url"``, ``"REDIS_URL"``, ...);
    None when none is given."""
    for level in _LEVELS:
        given = [(name, v) for name, dest in level if (v := _value(args, name, dest))]
        if len(given) == 2 and given[0][1] != given[1][1]:
            (a, url_a), (b, url_b) = given
            raise CliError(
                f"{a} ({masked(url_a)!r}) and {b} ({masked(url_b)!r}) name different stores; "
                f"give one (they are two names for one setting)",
                EXIT_USAGE,
            )
        if given:
            name, url = given[0]
            if "REDIS" in name.upper() and scheme_of(url) in OTHER_STORE_SCHEMES:
                raise CliError(
                    f"{name} takes a Redis URL; got {masked(url)!r} (use "
                    f"{'--store-url' if name.startswith('--') else 'CRONLOCK_STORE_URL'})",
                    EXIT_USAGE,
                )
            return url, name
    return None


def store_url(args: argparse.Namespace) -> tuple[str, str]:
    """`given_store_url`, a usage error when there is none."""
    found = given_store_url(args)
    if found is not None:
        return found
    raise CliError(
        "no store URL: pass --store-url (or --redis-url), or set CRONLOCK_STORE_URL, "
        "CRONLOCK_REDIS_URL or REDIS_URL",
        EXIT_USAGE,
    )


def _is_cluster_node(client: Any) -> bool:
    """Whether ``client``'s server is a Cluster node; False when it cannot tell."""
    try:
        info = client.info("cluster")
    except RedisError:
        return False
    return str(info.get("cluster_enabled", "0")) == "1"


def open_store(
    args: argparse.Namespace,
    *,
    socket_timeout: float = 10.0,
    sql_options: Optional[dict[str, Any]] = None,
) -> Store:
    """The store the command line names, with ``args.prefix``.

    ``sql_options`` go to an SQL store's constructor (``create_schema=...``), overriding
    the URL's. Usage error (2) for a bad URL, 69 when a Cluster cannot be reached;
    ``args.store`` is set, so `cronlock.cli.main` knows which errors mean "unavailable".
    """
    url, source = store_url(args)
    options: dict[str, Any] = dict(sql_options or {})
    if is_redis_url(url):
        options = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": 5,
            "decode_responses": False,
        }
    try:
        store = from_url(url, prefix=args.prefix, **options)
        if isinstance(store, RedisStore) and _detect_cluster(url, store):
            store.client.close()
            store = from_url(url, prefix=args.prefix, cluster=True, **options)
    except ConfigurationError as error:
        raise CliError(f"{source}: {error}", EXIT_USAGE) from None
    except RedisClusterException as error:
        raise CliError(f"Redis Cluster unavailable: {error}", EXIT_UNAVAILABLE) from None
    args.store = store
    return store


def _detect_cluster(url: str, store: RedisStore) -> bool:
    if not url.lower().startswith(("redis://", "rediss://", "valkey://", "valkeys://")):
        return False  # Sentinel or a unix socket: never a Cluster
    if split_cluster_flag(url)[1] is not None:
        return False  # the URL says which it is
    return not isinstance(store.client, RedisCluster) and _is_cluster_node(store.client)


def close_store(store: Store) -> None:
    """Let go of the store's connections (a command's last step)."""
    if isinstance(store, RedisStore):
        store.client.close()
        return
    close = getattr(store, "close", None)
    if close is not None:
        close()
