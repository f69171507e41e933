"""``cronlock store init|check``: cronlock's tables, made ahead of time and checked.

A runner creates the tables of an SQL store on first use; a DBA who would rather not
give the application ``CREATE`` rights runs ``store init`` once (idempotent), then the
runners use ``create_schema=False``. ``store check`` compares the schema version in the
database with the one this cronlock writes, for a deploy script to run first. Redis has
no tables: both say so and exit 0. The tables hold every prefix, so ``--prefix`` does
not matter here.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Optional

from cronlock._redisurl import masked, scheme_of
from cronlock.cli._common import EXIT_FAILURE, EXIT_OK, CliError, add_global_options, emit_json
from cronlock.cli._connect import open_store, store_url
from cronlock.stores import RedisStore, SqliteStore, SqlStore, Store
from cronlock.stores.sql.schema import SCHEMA_VERSION
from cronlock.stores.urls import POSTGRES_SCHEMES, is_redis_url

NAME = "store"
EXPECTED = str(SCHEMA_VERSION)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``store`` with its ``init`` and ``check`` subcommands."""
    parser = subparsers.add_parser(
        NAME,
        help="create cronlock's tables ahead of time, or check their schema version",
        description=(
            "cronlock's tables in an SQL store (sqlite:///FILE, postgresql://...). Runners "
            "create them on first use; 'init' does it ahead of time, 'check' compares "
            "their schema version with this cronlock's. Redis has no tables: both exit 0."
        ),
    )
    add_global_options(parser, suppress=True)
    sub = parser.add_subparsers(dest="store_action", metavar="ACTION")
    sub.required = True
    init = sub.add_parser(
        "init",
        help="create cronlock's tables (idempotent)",
        description=(
            "Create cronlock's tables in the store of --store-url (safe to run again, and "
            "while runners use the store), then print the store, where the tables are and "
            "their schema version. Exits 1, creating nothing, if tables of another schema "
            "version are there."
        ),
    )
    add_global_options(init, suppress=True)
    init.set_defaults(handler=run_init)
    check = sub.add_parser(
        "check",
        help="compare the tables' schema version with this cronlock's (exit 1 if not equal)",
        description=(
            f"Print the schema version found in the store of --store-url and the one this "
            f"cronlock reads and writes ({SCHEMA_VERSION}). Exits 1 when they differ or the "
            f"tables are absent; creates nothing."
        ),
    )
    add_global_options(check, suppress=True)
    check.set_defaults(handler=run_check)


def _kind(args: argparse.Namespace) -> str:
    """The store's name for the report: ``redis``, ``sqlite`` or ``postgresql``."""
    url = store_url(args)[0]
    if is_redis_url(url):
        return "redis"
    return "postgresql" if scheme_of(url) in POSTGRES_SCHEMES else scheme_of(url)


def _no_tables(args: argparse.Namespace, store: Store, what: str) -> int:
    """Redis: nothing to create or check."""
    if isinstance(store, RedisStore):
        store.client.close()  # it may have asked whether the server is a Cluster node
    if args.json:
        location = masked(store_url(args)[0])
        emit_json({"store": "redis", "location": location, "schema_version": None})
    else:
        print(f"redis: {what}: Redis keeps no tables (cronlock writes its keys on first use)")
    return EXIT_OK


def _mismatch(found: str, location: str) -> str:
    newer = found.isdigit() and int(found) > SCHEMA_VERSION
    return (
        f"cronlock's tables in {location} have schema version {found}; this cronlock reads "
        f"and writes version {SCHEMA_VERSION}" + (": upgrade cronlock" if newer else "")
    )


def run_init(args: argparse.Namespace) -> int:
    """Create the tables unless tables of another version are there."""
    store = open_store(args, sql_options={"create_schema": True})
    if not isinstance(store, SqlStore):
        return _no_tables(args, store, "nothing to create")
    location = store.backend.location()
    try:
        found = store.schema_version()
        if found is not None and found != EXPECTED:
            raise CliError(_mismatch(found, location), EXIT_FAILURE)
        store.ensure_schema()
        now = store.schema_version()
    finally:
        store.close()
    if now != EXPECTED:  # another process wrote something else meanwhile
        raise CliError(_mismatch(str(now), location), EXIT_FAILURE)
    action = "created" if found is None else "present"
    if args.json:
        emit_json(
            {"store": _kind(args), "location": location, "schema_version": now, "action": action}
        )
    elif found is None:
        print(f"{_kind(args)}: created cronlock's tables in {location}: schema version {now}")
    else:
        print(
            f"{_kind(args)}: cronlock's tables are already in {location}: schema version "
            f"{now}; nothing to create"
        )
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    """Report the version found; 1 when it is not this cronlock's or there are no tables."""
    store = open_store(args, sql_options={"create_schema": False})
    if not isinstance(store, SqlStore):
        return _no_tables(args, store, "no tables to check")
    location = store.backend.location()
    found: Optional[str] = None
    missing_file = isinstance(store, SqliteStore) and not os.path.exists(store.path)
    if not missing_file:  # opening a SQLite file that is not there would create it
        try:
            found = store.schema_version()
        finally:
            store.close()
    ok = found == EXPECTED
    if args.json:
        report: dict[str, Any] = {"store": _kind(args), "location": location}
        emit_json({**report, "found": found, "expected": EXPECTED, "ok": ok})
    elif ok:
        print(
            f"{_kind(args)}: cronlock's tables in {location} have schema version {found}, "
            f"the version this cronlock reads and writes"
        )
    elif found is None:
        where = f"{location} does not exist" if missing_file else f"none in {location}"
        print(
            f"{_kind(args)}: no cronlock tables ({where}); this cronlock writes schema "
            f"version {SCHEMA_VERSION}: run cronlock store init"
        )
    else:
        print(f"{_kind(args)}: {_mismatch(found, location)}")
    return EXIT_OK if ok else EXIT_FAILURE
