"""``cronlock schedule add|list|remove``: dynamic schedules for ``@runner.task`` handlers."""

from __future__ import annotations

import argparse
import json
import sys
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
from cronlock.options import OPTIONS, JobOption

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
    for option in OPTIONS:  # one flag per option a dynamic schedule may set
        if option.dynamic:
            add.add_argument(
                f"--{option.name.replace('_', '-')}",
                dest=option.name,
                type=option.cli_type,
                choices=option.choices or None,
                metavar=None if option.choices else _metavar(option),
                help=_help(option),
            )
    add.set_defaults(handler=run_add)

    listing = sub.add_parser("list", help="list schedules")
    add_global_options(listing, suppress=True)
    listing.set_defaults(handler=run_list)

    remove = sub.add_parser("remove", help="remove a schedule (exit 1 if there is none)")
    add_global_options(remove, suppress=True)
    remove.add_argument("schedule_id", metavar="ID", help="the id `schedule list` shows")
    remove.set_defaults(handler=run_remove)


def _metavar(option: JobOption) -> str:
    return "SECONDS" if option.cli_type is float else "N"


def _help(option: JobOption) -> str:
    """The option's meaning and its default, from the option table."""
    if option.runner_default:
        return f"{option.help} (default: the runner's, {option.default})"
    if option.default is None:
        return option.help
    return f"{option.help} (default {option.default:g})"


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
            **{o.name: getattr(args, o.name) for o in OPTIONS if o.dynamic},
        )
    except (ValueError, TypeError) as error:  # ConfigurationError is a ValueError
        raise CliError(str(error), EXIT_USAGE) from None
    if args.json:
        emit_json(spec.as_dict())
    else:
        print(f"added schedule {spec.id}: task {spec.task}, {spec.describe()}")
    hint_elsewhere(args, admin)  # stored, but no runner under this prefix will run it
    if not any(spec.task in runner.tasks for runner in admin.runners()):
        print(
            f"cronlock {args.command_name}: warning: no live runner has a handler for task "
            f"{spec.task!r}: the schedule is stored but does not run until one does",
            file=sys.stderr,
        )
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
