"""``cronlock demo``: see one slot per replica, a kill -9 and a takeover, in half a minute."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cronlock._redisurl import masked
from cronlock.cli._common import EXIT_USAGE, CliError
from cronlock.cli._connect import given_store_url
from cronlock.stores.urls import is_redis_url


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run 3 replicas on a private server, kill one, watch the takeover",
        description=(
            "Start a private Redis/Valkey server (or use the Redis of --store-url), run "
            "replica processes with two jobs, SIGKILL the replica running the long job and "
            "show another one taking the same slot over. Exits 0 only if every slot ran once."
        ),
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, help="seconds to watch (default 30)"
    )
    parser.add_argument("--replicas", type=int, default=3, help="replica processes (default 3)")
    parser.add_argument("--no-kill", action="store_true", help="do not kill a replica")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cronlock.cli._demo_fleet import run_demo  # noqa: PLC0415 - keep `cronlock --help` fast

    if args.replicas < 1 or args.replicas > 20:
        raise CliError(f"--replicas must be between 1 and 20; got {args.replicas}", EXIT_USAGE)
    if args.duration <= 0:
        raise CliError(f"--duration must be > 0; got {args.duration}", EXIT_USAGE)
    given = given_store_url(args)
    url = None if given is None else given[0]
    if given is not None and not is_redis_url(given[0]):
        raise CliError(f"the demo runs on Redis; {given[1]} names {masked(given[0])!r}", EXIT_USAGE)
    return run_demo(url, args.replicas, args.duration, not args.no_kill, sys.stdout)
