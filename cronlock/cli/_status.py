"""``cronlock status``: one summary of the fleet (runners, jobs, failures, pauses)."""

from __future__ import annotations

import argparse
import sys

from cronlock.cli._common import EXIT_FAILURE, EXIT_OK, add_global_options, emit_json
from cronlock.cli._ops import admin_for, hint_elsewhere

NAME = "status"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="summary: live runners, jobs, paused, running, failing",
        description=(
            "Print counts over the fleet under --prefix. Exits 1 when no runner is alive "
            "or a job's latest run(s) failed, so it can back a monitoring check; stderr "
            "says which (and names other prefixes that have runners)."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the summary; 1 when nothing runs or something fails (and say which on stderr)."""
    admin = admin_for(args)
    status = admin.status()
    if args.json:
        emit_json(status.as_dict())
    else:
        print(f"runners alive:    {status.runners}")
        print(f"jobs registered:  {status.jobs}")
        print(
            f"paused:           {status.paused}{'  (pause-all is on)' if status.pause_all else ''}"
        )
        print(f"running now:      {status.running}")
        print(f"failing:          {status.failing}")
        print(f"dynamic schedules: {status.schedules}")
    if status.runners == 0 and not hint_elsewhere(args, admin, runners_here=0):
        print(f"cronlock {NAME}: no live runner under prefix {args.prefix!r}", file=sys.stderr)
    if status.failing:
        print(
            f"cronlock {NAME}: {status.failing} job(s) failing (see: cronlock jobs)",
            file=sys.stderr,
        )
    return EXIT_FAILURE if status.runners == 0 or status.failing else EXIT_OK
