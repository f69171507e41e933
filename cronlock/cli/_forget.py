"""``cronlock forget KEY``: drop a job deleted from the code (registry, state, history)."""

from __future__ import annotations

import argparse

from cronlock.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_global_options,
    emit_json,
)
from cronlock.cli._ops import admin_for
from cronlock.errors import ConfigurationError

NAME = "forget"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``forget`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="drop a job no runner has any more: registry entry, state, history, triggers",
        description=(
            "Drop job KEY from the registry with its state, run history and pending "
            "triggers, so `cronlock jobs` and the dashboard stop listing it. For jobs deleted "
            "from the code (`cronlock jobs` shows when a runner last had each). A runner that "
            "still has the job registers it again at its next start. Exits 1 when there was "
            "nothing to forget."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("key", metavar="KEY", help="the job's key (see: cronlock jobs)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Forget KEY; 1 when nothing was stored for it."""
    admin = admin_for(args)
    try:
        runners = admin.runners_with(args.key)
        found = admin.forget(args.key)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    if args.json:
        emit_json({"forgot": args.key, "existed": found, "runners": runners})
    elif found:
        print(
            f"forgot {args.key}"
            + (
                f" (warning: {runners} live runner(s) still have it and will register it again "
                "when they restart)"
                if runners
                else ""
            )
        )
    else:
        print(f"nothing stored for {args.key} under {admin.prefix}")
    return EXIT_OK if found else EXIT_FAILURE
