"""``cronlock schedule add|list|remove``: dynamic schedules for ``@runner.task`` handlers."""

from __future__ import annotations

import argparse
import json
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
from cronlock.cli._ops import admin_for, hint_elsewhere, short

NAME = "schedule"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``schedule`` with its ``add``, ``list`` and ``remove`` subcommands."""
    parser = subparsers.add_parser(
        NAME,
        help="add, list or remove dynamic schedules",
        description=(
            "Dynamic schedules give a handler registered with @runner.task(NAME) a schedule "
            "at runtime; every runner with the task picks it up within a few seconds."
        ),
    )
    add_global_options(parser, suppress=True)
    sub = parser.add_subparsers(dest="schedule_action", metavar="ACTION")
    sub.required = True

    add = sub.add_parser(
        "add",
        help="add (or replace) a schedule",
        description=(
            "Store a schedule for TASK. Exactly one of --cron / --interval. Invalid values "
            "exit 2, naming the value, and store nothing."
        ),
    )
    add_global_options(add, suppress=True)
    add.add_argument(
        "task", metavar="TASK", help="the name a handler was registered with: @runner.task(TASK)"
    )
    add.add_argument(
        "--cron", metavar="EXPR", help='run at the times of a cron expression, e.g. "0 3 * * *"'
    )
    add.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="run every SECONDS, on a grid counted from the UTC epoch",
    )
    add.add_argument("--timezone", default="UTC", metavar="TZ", help="for --cron (default UTC)")
    add.add_argument("--payload", metavar="JSON", help="JSON value passed as ctx.payload")
    add.add_argument(
        "--id",
        dest="schedule_id",
        metavar="ID",
        help="the schedule's id, also the job key of its runs; an existing one is replaced "
        "(default: TASK-<random>)",
    )
    add.add_argument(
        "--ttl",
        type=float,
        metavar="SECONDS",
        help="lease length, renewed every ttl/3 while a run lasts (default: the runner's)",
    )
    add.add_argument(
        "--overlap",
        choices=("skip", "allow", "replace"),
        help="a slot due while the previous run holds its lease: skip it, allow it to "
        "start alongside, or replace: start it and cancel the old run (default: skip)",
    )
    add.add_argument(
        "--max-attempts",
        type=int,
        metavar="N",
        help="runs of one slot, takeovers included, before it is abandoned (default: the "
        "runner's, 3)",
    )
    add.add_argument(
        "--catch-up",
        type=float,
        metavar="SECONDS",
        help="how late a slot may still start (default: one period, at most 60)",
    )
    add.add_argument(
        "--jitter",
        type=float,
        metavar="SECONDS",
        help="wait a random delay up to this before each claim (default 0)",
    )
    add.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help="calls again within the slot after the handler raised (default 0)",
    )
    add.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="cancel a run that takes longer"
    )
    add.set_defaults(handler=run_add)

    listing = sub.add_parser("list", help="list schedules")
    add_global_options(listing, suppress=True)
    listing.set_defaults(handler=run_list)

    remove = sub.add_parser("remove", help="remove a schedule (exit 1 if there is none)")
    add_global_options(remove, suppress=True)
    remove.add_argument("schedule_id", metavar="ID", help="the id `schedule list` shows")
    remove.set_defaults(handler=run_remove)


def run_add(args: argparse.Namespace) -> int:
    """Validate and store a schedule."""
    payload: Any = None
    if args.payload is not None:
        try:
            payload = json.loads(args.payload)
        except ValueError as error:
            raise CliError(f"--payload is not JSON: {error}", EXIT_USAGE) from None
    admin = admin_for(args)
    try:
        spec = admin.add_schedule(
            args.task,
            cron=args.cron,
            interval=args.interval,
            timezone=args.timezone,
            payload=payload,
            schedule_id=args.schedule_id,
            ttl=args.ttl,
            overlap=args.overlap,
            max_attempts=args.max_attempts,
            catch_up=args.catch_up,
            jitter=args.jitter,
            retries=args.retries,
            timeout=args.timeout,
        )
    except (ValueError, TypeError) as error:  # ConfigurationError is a ValueError
        raise CliError(str(error), EXIT_USAGE) from None
    if args.json:
        emit_json(spec.as_dict())
    else:
        print(f"added schedule {spec.id}: task {spec.task}, {spec.describe()}")
    hint_elsewhere(args, admin)  # stored, but no runner under this prefix will run it
    return EXIT_OK


def run_list(args: argparse.Namespace) -> int:
    """Print every schedule."""
    admin = admin_for(args)
    specs = admin.list_schedules()
    if not specs:
        hint_elsewhere(args, admin)
    if args.json:
        emit_json([s.as_dict() for s in specs])
    elif not specs:
        print(f"no dynamic schedules under {args.prefix}:")
    else:
        rows = [
            (s.id, s.task, short(s.describe(), 40), short(json.dumps(s.payload), 40)) for s in specs
        ]
        print(render_table(["ID", "TASK", "SCHEDULE", "PAYLOAD"], rows))
    return EXIT_OK


def run_remove(args: argparse.Namespace) -> int:
    """Delete one schedule; 1 when it did not exist."""
    admin = admin_for(args)
    removed = admin.remove_schedule(args.schedule_id)
    if not removed:
        hint_elsewhere(args, admin)
    if args.json:
        emit_json({"removed": removed, "id": args.schedule_id})
    else:
        print(f"removed {args.schedule_id}" if removed else f"no schedule {args.schedule_id!r}")
    return EXIT_OK if removed else EXIT_FAILURE
