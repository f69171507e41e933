"""Where the demo's replicas keep their state, and which store URL they are given.

``--store redis`` (the default): a private Redis/Valkey server started for the demo, or
the Redis of a store URL; ``--store sqlite``: a new file in a temporary directory (no
server at all), removed at the end; ``--store postgres``: the PostgreSQL of
``--store-url`` or ``$CRONLOCK_STORE_URL``. Every choice is checked here, before a
process starts, and refused as a usage error naming the value.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Optional
from urllib.parse import quote

from cronlock._redisurl import client_from_url, masked, scheme_of
from cronlock.cli._common import EXIT_USAGE, CliError
from cronlock.cli._connect import given_store_url
from cronlock.errors import ConfigurationError
from cronlock.stores import SqlStore, Store, from_url
from cronlock.stores.urls import POSTGRES_SCHEMES, is_redis_url
from cronlock.testing import RedisServer

__all__ = ["PREFIX", "DemoStore", "demo_store", "prepared", "replica_options"]

#: The namespace of every key or row the demo writes.
PREFIX = "cronlock-demo"


@dataclass(frozen=True)
class DemoStore:
    """The store ``--store`` chose: its kind, the URL given (None: one the demo makes) and,
    for PostgreSQL, the store opened to check that URL."""

    kind: str
    url: Optional[str]
    store: Optional[Store] = None


def demo_store(args: argparse.Namespace) -> DemoStore:
    """What ``--store`` and the store URL name, checked before any process starts."""
    url = _demo_url(args)
    if args.store_kind != "postgres":
        return DemoStore(args.store_kind, url)
    assert url is not None
    try:
        return DemoStore("postgres", url, from_url(url, prefix=PREFIX))
    except ConfigurationError as error:
        raise CliError(f"--store postgres: {error}", EXIT_USAGE) from None


def _demo_url(args: argparse.Namespace) -> Optional[str]:
    """The store URL the demo runs on; None for one it makes itself (a private Redis, a
    SQLite file). A URL that does not fit ``--store`` is a usage error."""
    given = given_store_url(args)
    if args.store_kind == "sqlite":
        if given is not None and given[1].startswith("--"):
            raise CliError(
                f"--store sqlite makes a file of its own; {given[1]} names "
                f"{masked(given[0])!r} (give one of the two)",
                EXIT_USAGE,
            )
        return None  # a URL in the environment is the application's, not the demo's
    if args.store_kind == "postgres":
        if given is None:
            raise CliError(
                "--store postgres needs a PostgreSQL URL: pass --store-url "
                "postgresql://USER@HOST/DATABASE or set CRONLOCK_STORE_URL",
                EXIT_USAGE,
            )
        if scheme_of(given[0]) not in POSTGRES_SCHEMES:
            raise CliError(
                f"--store postgres needs a PostgreSQL URL; {given[1]} names {masked(given[0])!r}",
                EXIT_USAGE,
            )
        return given[0]
    if given is not None and not is_redis_url(given[0]):
        raise CliError(
            f"the demo runs on Redis unless --store sqlite or --store postgres says "
            f"otherwise; {given[1]} names {masked(given[0])!r}",
            EXIT_USAGE,
        )
    return None if given is None else given[0]


def replica_options(url: str) -> dict[str, Any]:
    """What a replica passes to `from_url` besides the URL: short Redis timeouts."""
    return {"socket_timeout": 2, "socket_connect_timeout": 2} if is_redis_url(url) else {}


@contextmanager
def prepared(chosen: DemoStore, jobs: Sequence[str], out: IO[str]) -> Iterator[str]:
    """The URL the replicas share, without what an earlier demo left there; a server or
    file made for the demo is removed when the block ends."""
    url, store = chosen.url, chosen.store
    if chosen.kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="cronlock-demo-") as directory:
            path = os.path.join(directory, "demo.db")
            out.write(f"created a SQLite file: {path} (no server; removed at the end)\n")
            yield "sqlite:///" + quote(path)  # an absolute path: sqlite:////tmp/...
        return
    if url is None:
        server = RedisServer().start()
        try:
            out.write(
                f"started a private server: {os.path.basename(server.binary)} on {server.url}\n"
            )
            yield server.url
        finally:
            server.stop()
        return
    if store is None:  # a Redis of the user's: every key of the demo's prefix
        out.write(f"using {masked(url)} (keys under {PREFIX}:)\n")
        client = client_from_url(url)
        for key in client.scan_iter(f"{PREFIX}:*"):
            client.delete(key)
        client.close()
    else:
        out.write(f"using {masked(url)} (rows under prefix {PREFIX!r})\n")
        for job in jobs:
            store.forget(job)
        if isinstance(store, SqlStore):
            store.close()  # this process's connections; the replicas open their own
    yield url
