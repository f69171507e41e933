"""``cronlock demo``: see one slot per replica, a kill -9 and a takeover, in half a minute."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cronlock.cli._common import EXIT_USAGE, REDIS_URL_HELP, STORE_URL_HELP, CliError

#: The choices of ``--store`` (`cronlock.cli._demo_store` readies each).
STORES = ("redis", "sqlite", "postgres")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run 3 replicas on a private server (or one SQLite file), kill one, watch the "
        "takeover",
        description=(
            "Run replica processes with two jobs on one store, SIGKILL the replica running "
            "the long job and show another one taking the same slot over. The store: "
            "--store redis (default) starts a private Redis/Valkey server, or uses the "
            "Redis of the store URL (--store-url, else the environment); --store sqlite "
            "uses a new SQLite file in a temporary directory (no server at all), removed at "
            "the end; --store postgres uses the PostgreSQL of --store-url or "
            "$CRONLOCK_STORE_URL (rows under the prefix cronlock-demo). Exits 0 only if "
            "every slot ran once."
        ),
    )
    for flag, text in (("--store-url", STORE_URL_HELP), ("--redis-url", REDIS_URL_HELP)):
        # after the command too (`demo --store postgres --store-url URL`), as on the others
        parser.add_argument(flag, metavar="URL", default=argparse.SUPPRESS, help=text)
    parser.add_argument(
        "--store",
        dest="store_kind",  # args.store is the opened store (see cronlock.cli.main)
        choices=STORES,
        default="redis",
        help="where the replicas keep their state (default: redis)",
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, help="seconds to watch (default 30)"
    )
    parser.add_argument("--replicas", type=int, default=3, help="replica processes (default 3)")
    parser.add_argument("--no-kill", action="store_true", help="do not kill a replica")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # keep `cronlock --help` fast: the demo's modules load only when it runs
    from cronlock.cli._demo_fleet import run_demo  # noqa: PLC0415
    from cronlock.cli._demo_store import demo_store  # noqa: PLC0415

    if args.replicas < 1 or args.replicas > 20:
        raise CliError(f"--replicas must be between 1 and 20; got {args.replicas}", EXIT_USAGE)
    if args.duration <= 0:
        raise CliError(f"--duration must be > 0; got {args.duration}", EXIT_USAGE)
    chosen = demo_store(args)
    if chosen.store is not None:
        args.store = chosen.store  # its errors mean "unavailable" (exit 69), see cronlock.cli
    return run_demo(chosen, args.replicas, args.duration, not args.no_kill, sys.stdout)
