"""``cronlock history [KEY] [--limit N]``: the latest run history entries."""

from __future__ import annotations

import argparse

from cronlock.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_global_options,
    emit_json,
    render_table,
)
from cronlock.cli._ops import admin_for, hint_elsewhere, short, when
from cronlock.errors import ConfigurationError
from cronlock.history import HistoryEntry

NAME = "history"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``history`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="show run history (one job, or every registered job)",
        description=(
            "Show the newest history entries of job KEY, or of every registered job merged "
            "by time: runs started, succeeded, failed (with the error type), cancelled, "
            "taken over, triggered."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("key", nargs="?", metavar="KEY", help="one job's key")
    parser.add_argument("--limit", type=int, default=20, help="entries to show (default 20)")
    parser.add_argument(
        "--traceback", action="store_true", help="print the traceback of failed runs"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the entries, newest first."""
    admin = admin_for(args)
    try:
        if args.key:
            entries = admin.history(args.key, args.limit)
        else:
            entries = []
            for job in admin.jobs():
                entries += admin.history(job.key, args.limit)
            entries = sorted(entries, key=lambda e: e.id, reverse=True)[: args.limit]
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    if not entries:
        hint_elsewhere(args, admin)
    if args.json:
        emit_json([e.as_dict() for e in entries])
        return EXIT_OK
    if not entries:
        print("no history" + (f" for job {args.key!r}" if args.key else ""))
        return EXIT_OK
    print(
        render_table(
            [
                "AT (UTC)",
                "KEY",
                "EVENT",
                "KIND",
                "SLOT (UTC)",
                "ATT",
                "FENCE",
                "TOOK",
                "HOLDER",
                "DETAIL",
            ],
            [_row(e) for e in entries],
        )
    )
    if args.traceback:
        for e in entries:
            if e.traceback:
                print(f"\n--- {e.key} slot {when(e.slot)} attempt {e.attempt}:\n{e.traceback}")
    return EXIT_OK


def _row(e: HistoryEntry) -> tuple[object, ...]:
    detail = e.error_type or e.reason or (f"trigger {e.trigger_id}" if e.trigger_id else "")
    took = "" if e.duration is None else f"{e.duration:.3f}s"
    return (
        when(e.at),
        short(e.key, 30),
        e.event,
        e.kind,
        when(e.slot),
        e.attempt or "",
        e.fencing_token or "",
        took,
        short(e.holder, 40),
        short(detail, 40),
    )
