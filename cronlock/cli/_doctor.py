"""``cronlock doctor``: can this Redis server keep cronlock's promises?"""

from __future__ import annotations

import argparse
from typing import Any

from cronlock.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    add_global_options,
    connect,
    emit_json,
    render_table,
)
from cronlock.doctor import check_server, worst_status

NAME = "doctor"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``doctor`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="check the Redis server (version, eviction, clock, persistence, ACL, ...)",
        description=(
            "Run the server checks of cronlock.doctor.check_server and print one "
            "pass/warn/fail line each. Exits 69 when the server cannot be reached, 1 if "
            "any other check fails, else 0."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument(
        "--clock-tolerance",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="warn when this machine's clock is further than this from Redis TIME "
        "(default: %(default)s)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the checks; 69 if the server is unreachable, 1 if any check failed."""
    client: Any = connect(args)
    try:
        checks = check_server(client, prefix=args.prefix, clock_tolerance=args.clock_tolerance)
    finally:
        client.close()
    status = worst_status(checks)
    unreachable = any(c.name == "reachable" and c.status == "fail" for c in checks)
    if args.json:
        emit_json(
            {
                "status": status,
                "checks": [
                    {"name": c.name, "status": c.status, "detail": c.detail} for c in checks
                ],
            }
        )
    else:
        rows = [(c.status, c.name, c.detail) for c in checks]
        print(render_table(["STATUS", "CHECK", "DETAIL"], rows))
    if unreachable:
        return EXIT_UNAVAILABLE
    return EXIT_FAILURE if status == "fail" else EXIT_OK
