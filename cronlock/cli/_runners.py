"""``cronlock runners``: the runners whose heartbeat is live."""

from __future__ import annotations

import argparse

from cronlock.cli._common import EXIT_OK, add_global_options, emit_json, render_table
from cronlock.cli._ops import admin_for, ago, hint_elsewhere

NAME = "runners"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``runners`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="list live runners (host, pid, version, jobs, last heartbeat)",
        description="List every runner under --prefix whose heartbeat key is live.",
    )
    add_global_options(parser, suppress=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the table (or JSON)."""
    admin = admin_for(args)
    runners = admin.runners()
    if not runners:
        hint_elsewhere(args, admin, runners_here=0)
    if args.json:
        emit_json([r.as_dict() for r in runners])
        return EXIT_OK
    if not runners:
        print(f"no live runners under {args.prefix}:")
        return EXIT_OK
    rows = [
        (
            r.id,
            r.host,
            r.pid,
            r.version,
            len(r.jobs),
            ago(r.started),
            ago(r.heartbeat),
            ago(r.last_tick),
        )
        for r in runners
    ]
    print(
        render_table(
            ["ID", "HOST", "PID", "VERSION", "JOBS", "STARTED", "HEARTBEAT", "LAST TICK"], rows
        )
    )
    return EXIT_OK
