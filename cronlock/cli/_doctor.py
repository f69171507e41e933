"""``cronlock doctor``: can this store (a Redis server, every node of a Cluster) keep
cronlock's promises?"""

from __future__ import annotations

import argparse

from cronlock.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    add_global_options,
    emit_json,
    render_table,
)
from cronlock.cli._connect import open_store
from cronlock.doctor import worst_status
from cronlock.ops.doctor import check_store

NAME = "doctor"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``doctor`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="check the store (Redis: version, eviction, clock, persistence, ACL, ...)",
        description=(
            "Run the checks of cronlock.ops.check_store and print one pass/warn/fail line "
            "each: on Redis the server checks of cronlock.doctor.check_server (on a Cluster, "
            "for every primary); on another store, that it answers and its clock. Exits 69 "
            "when the store (or a Cluster node) cannot be reached, 1 if any other check "
            "fails, else 0."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument(
        "--clock-tolerance",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="warn when this machine's clock is further than this from the store's "
        "(default: %(default)s)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the checks; 69 if the store is unreachable, 1 if any check failed."""
    store = open_store(args)
    client = getattr(store, "client", None)
    try:
        checks = check_store(store, clock_tolerance=args.clock_tolerance)
    finally:
        if client is not None:
            client.close()
    status = worst_status(checks)
    unreachable = any(c.name == "reachable" and c.status == "fail" for c in checks)
    nodes = any(c.node for c in checks)
    if args.json:
        emit_json(
            {
                "status": status,
                "checks": [
                    {"name": c.name, "status": c.status, "detail": c.detail, "node": c.node}
                    for c in checks
                ],
            }
        )
    elif nodes:
        rows = [(c.status, c.node or "", c.name, c.detail) for c in checks]
        print(render_table(["STATUS", "NODE", "CHECK", "DETAIL"], rows))
    else:
        print(
            render_table(
                ["STATUS", "CHECK", "DETAIL"], [(c.status, c.name, c.detail) for c in checks]
            )
        )
    if unreachable:
        return EXIT_UNAVAILABLE
    return EXIT_FAILURE if status == "fail" else EXIT_OK
