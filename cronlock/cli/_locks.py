"""``cronlock locks [KEY]``: who holds which lock right now."""

from __future__ import annotations

import argparse
from typing import Any

from cronlock.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_global_options,
    emit_json,
    render_table,
)
from cronlock.cli._connect import close_store, open_store
from cronlock.errors import ConfigurationError
from cronlock.lock import LockInfo, inspect
from cronlock.stores import RedisStore, Store
from cronlock.stores.sql import SqlStore
from cronlock.stores.sql.leases import held_locks

NAME = "locks"
SCAN_LIMIT = 10_000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``locks`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="show held locks (all under the prefix, or one KEY)",
        description=(
            "Show the holder, age, remaining ttl and fencing token of one lock, or of every "
            "held lock under --prefix (at most 10000; on Redis found with SCAN). With KEY, "
            "exits 1 when that lock is free."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("key", nargs="?", metavar="KEY", help="one lock's name")
    parser.set_defaults(handler=run)


def key_from_redis_key(redis_key: str, prefix: str) -> str | None:
    """The user key inside ``PREFIX:lock:{KEY}``, or None if it is not one of ours."""
    head = f"{prefix}:lock:{{"
    if redis_key.startswith(head) and redis_key.endswith("}"):
        return redis_key[len(head) : -1]
    return None


def _held_keys(client: Any, prefix: str) -> list[str]:
    keys = set()
    for raw in client.scan_iter(match=f"{prefix}:lock:{{*}}", count=500):
        name = key_from_redis_key(raw.decode() if isinstance(raw, bytes) else raw, prefix)
        if name is not None:
            keys.add(name)
        if len(keys) >= SCAN_LIMIT:
            break
    return sorted(keys)


def _held(store: Store, key: str | None) -> list[LockInfo]:
    """The held locks (``key`` alone, if given), read from the store."""
    if isinstance(store, SqlStore):
        return held_locks(store, key)
    assert isinstance(store, RedisStore)
    client = store.client
    names = [key] if key else _held_keys(client, store.prefix)
    infos = [inspect(client, name, prefix=store.prefix) for name in names]
    return [info for info in infos if info is not None]


def run(args: argparse.Namespace) -> int:
    """Print a table of held locks."""
    store = open_store(args)
    try:
        held = _held(store, args.key)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    finally:
        close_store(store)
    if args.json:
        emit_json(
            [
                {
                    "key": i.key,
                    "holder": i.holder,
                    "since": None if i.since is None else i.since.isoformat(),
                    "ttl_remaining": i.ttl_remaining,
                    "fencing_token": i.fencing_token,
                }
                for i in held
            ]
        )
    elif held:
        rows = [
            (
                i.key,
                i.holder or "?",
                "?" if i.since is None else i.since.strftime("%Y-%m-%d %H:%M:%SZ"),
                "-" if i.ttl_remaining is None else f"{i.ttl_remaining:.1f}s",
                "?" if i.fencing_token is None else i.fencing_token,
            )
            for i in held
        ]
        print(render_table(["KEY", "HOLDER", "SINCE (UTC)", "TTL", "FENCE"], rows))
    else:
        print(f"lock {args.key!r} is free" if args.key else f"no locks held under {args.prefix}:")
    return EXIT_FAILURE if args.key and not held else EXIT_OK
