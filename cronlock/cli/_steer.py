"""``cronlock pause|resume KEY`` (or ``--all``) and ``cronlock trigger KEY [--force]``.

Each says what will happen: a trigger of a paused job, and a pause of a key no runner
has registered, are refused (exit 3, nothing written) unless ``--force``; a trigger
that no live runner can take says so and when it expires.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from cronlock._durations import parse_duration
from cronlock.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    add_global_options,
    emit_json,
)
from cronlock.cli._ops import admin_for, hint_elsewhere
from cronlock.errors import ConfigurationError, TriggerRefused
from cronlock.ops.admin import DEFAULT_TRIGGER_EXPIRES_S


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
                + "."
                + (
                    " A KEY no runner has registered is refused (exit 3, nothing written) "
                    "unless --force (to pause a job before it is deployed)."
                    if name == "pause"
                    else " Exits 1 when KEY is not a registered job (it is resumed anyway)."
                )
            ),
        )
        add_global_options(parser, suppress=True)
        parser.add_argument(
            "key", nargs="?", metavar="KEY", help="the job's key (see: cronlock jobs)"
        )
        parser.add_argument("--all", action="store_true", help="every registered job")
        if name == "pause":
            parser.add_argument(
                "--force", action="store_true", help="pause a KEY no runner has registered"
            )
        parser.set_defaults(handler=run_pause if name == "pause" else run_resume)
    parser = subparsers.add_parser(
        "trigger",
        help="run a job once now, on exactly one replica",
        description=(
            "Queue one manual run of job KEY: one replica that has the job runs it within "
            "about a second, beside its scheduled slots. A paused job is refused (exit 3, "
            "nothing queued) unless --force; a run that still holds its lease (overlap skip) "
            "drops it unless --force; a request no replica took within --expires is dropped "
            "(see `cronlock history KEY`). Says so when no live runner has KEY. Exits 1 when "
            "no runner has registered KEY."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("key", metavar="KEY", help="the job's key (see: cronlock jobs)")
    parser.add_argument("--force", action="store_true", help="ignore pause and overlap")
    parser.add_argument(
        "--expires",
        metavar="DURATION",
        default=None,
        help="drop the request if no replica took it within this long: 90, 90s, 5m, 2h, 1d "
        f"(default: {DEFAULT_TRIGGER_EXPIRES_S / 60:.0f}m)",
    )
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
        known = admin.store.registry_entry(args.key) is not None
        if pause and not known and not args.force:
            hint_elsewhere(args, admin)
            raise CliError(
                f"no runner has registered job {args.key!r} under prefix {admin.prefix!r}: "
                "not paused (check the key and --prefix; pass --force to pause it anyway)",
                EXIT_REFUSED,
            )
        admin.pause(args.key) if pause else admin.resume(args.key)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    if not known:
        hint_elsewhere(args, admin)
    if args.json:
        emit_json({verb: args.key, "registered": known})
    else:
        print(f"{verb} {args.key}" + ("" if known else " (warning: no runner has registered it)"))
    return EXIT_OK if known or pause else EXIT_FAILURE


def run_pause(args: argparse.Namespace) -> int:
    """Pause KEY or every job."""
    return _steer(args, True)


def run_resume(args: argparse.Namespace) -> int:
    """Resume KEY or every job."""
    return _steer(args, False)


def run_trigger(args: argparse.Namespace) -> int:
    """Queue a manual run; refused when paused; warn when no live runner has the job."""
    admin = admin_for(args)
    try:
        expires = (
            DEFAULT_TRIGGER_EXPIRES_S
            if args.expires is None
            else parse_duration(args.expires, "--expires")
        )
        request = admin.trigger(args.key, force=args.force, expires=expires)
    except KeyError as error:
        hint_elsewhere(args, admin)
        raise CliError(str(error.args[0]), EXIT_FAILURE) from None
    except TriggerRefused as error:
        raise CliError(
            f"{error}: not triggered (pass --force to run it anyway)", EXIT_REFUSED
        ) from None
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    runners = admin.runners_with(args.key)
    warning = None
    if runners == 0:
        warning = (
            f"no live runner has job {args.key!r}: it runs only if one starts within "
            f"{_span(expires)} (then the request expires)"
        )
        hint_elsewhere(args, admin)
    if args.json:
        emit_json(
            {
                "key": args.key,
                "trigger": request,
                "force": args.force,
                "expires_in": expires,
                "runners": runners,
                "warning": warning,
            }
        )
    else:
        print(f"triggered {args.key} (request {request}); see: cronlock history {args.key}")
    if warning is not None:
        print(f"cronlock {args.command_name}: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _span(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))
