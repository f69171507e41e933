"""``cronlock pause|resume KEY`` (or ``--all``) and ``cronlock trigger KEY [--force]``."""

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
from cronlock.cli._ops import admin_for, hint_elsewhere
from cronlock.errors import ConfigurationError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``pause``, ``resume`` and ``trigger`` commands."""
    for name, verb in (("pause", "pause"), ("resume", "resume")):
        parser = subparsers.add_parser(
            name,
            help=f"{verb} a job (or --all) on every replica",
            description=(
                f"{verb.capitalize()} job KEY on every replica from its next claim (stored in "
                "Redis: survives restarts). A run in progress is not interrupted. With --all: "
                "every registered job"
                + (", and jobs registered later" if name == "pause" else ", and end pause-all")
                + ". Exits 1 when KEY is not a registered job (it is "
                + ("paused anyway)." if name == "pause" else "resumed anyway).")
            ),
        )
        add_global_options(parser, suppress=True)
        parser.add_argument(
            "key", nargs="?", metavar="KEY", help="the job's key (see: cronlock jobs)"
        )
        parser.add_argument("--all", action="store_true", help="every registered job")
        parser.set_defaults(handler=run_pause if name == "pause" else run_resume)
    parser = subparsers.add_parser(
        "trigger",
        help="run a job once now, on exactly one replica",
        description=(
            "Queue one manual run of job KEY: one replica that has the job runs it within "
            "about a second, beside its scheduled slots. Unless --force, it is dropped when "
            "the job is paused or a run still holds its lease (overlap skip); see `cronlock "
            "history KEY`. Exits 1 when no runner has registered KEY."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("key", metavar="KEY", help="the job's key (see: cronlock jobs)")
    parser.add_argument("--force", action="store_true", help="ignore pause and overlap")
    parser.set_defaults(handler=run_trigger)


def _steer(args: argparse.Namespace, pause: bool) -> int:
    admin = admin_for(args)
    if args.all == bool(args.key):
        raise CliError("give either KEY or --all", EXIT_USAGE)
    verb = "paused" if pause else "resumed"
    if args.all:
        count = admin.pause_all() if pause else admin.resume_all()
        if not count:
            hint_elsewhere(args, admin)
        if args.json:
            emit_json({verb: count, "all": True})
        else:
            print(
                f"{verb} {count} job(s)" + (" (and jobs registered from now on)" if pause else "")
            )
        return EXIT_OK
    try:
        admin.pause(args.key) if pause else admin.resume(args.key)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    known = any(j.key == args.key for j in admin.jobs())
    if not known:
        hint_elsewhere(args, admin)
    if args.json:
        emit_json({verb: args.key, "registered": known})
    else:
        print(f"{verb} {args.key}" + ("" if known else " (warning: no runner has registered it)"))
    return EXIT_OK if known else EXIT_FAILURE


def run_pause(args: argparse.Namespace) -> int:
    """Pause KEY or every job."""
    return _steer(args, True)


def run_resume(args: argparse.Namespace) -> int:
    """Resume KEY or every job."""
    return _steer(args, False)


def run_trigger(args: argparse.Namespace) -> int:
    """Queue a manual run."""
    admin = admin_for(args)
    try:
        request = admin.trigger(args.key, force=args.force)
    except KeyError as error:
        hint_elsewhere(args, admin)
        raise CliError(str(error.args[0]), EXIT_FAILURE) from None
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    if args.json:
        emit_json({"key": args.key, "trigger": request, "force": args.force})
    else:
        print(f"triggered {args.key} (request {request}); see: cronlock history {args.key}")
    return EXIT_OK
