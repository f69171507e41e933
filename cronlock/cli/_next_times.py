"""``cronlock next``: when will a cron expression fire, in its timezone and in UTC?"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Optional
from zoneinfo import ZoneInfo

from cronlock.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_global_options,
    emit_json,
    render_table,
)
from cronlock.errors import ConfigurationError
from cronlock.schedules import CronSchedule

NAME = "next"
MAX_COUNT = 1000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``next`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="show the next fire times of a cron expression",
        description=(
            "Print the next fire times of EXPRESSION in its timezone and in UTC, exactly as "
            "every replica computes them. A note marks each fire whose UTC offset differs "
            "from the previous one (a daylight-saving change). Needs no Redis."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("expression", metavar="EXPRESSION", help='e.g. "*/5 * * * *"')
    parser.add_argument(
        "--timezone", "--tz", default="UTC", metavar="TZ", help="IANA name (default: UTC)"
    )
    parser.add_argument(
        "--count", "-n", type=_count, default=5, metavar="N", help="how many (default: 5)"
    )
    parser.add_argument(
        "--after",
        metavar="ISO",
        help="start after this time (ISO 8601; without an offset it is read in --timezone; "
        "default: now)",
    )
    parser.add_argument(
        "--dst-fold",
        default="once",
        choices=("once", "both"),
        metavar="POLICY",
        help="what to do with a repeated local hour (default: once; see CronSchedule)",
    )
    parser.set_defaults(handler=run)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_COUNT}; got {value}")
    return value


def parse_after(text: Optional[str], zone: tzinfo, now: float) -> int:
    """``--after`` as epoch milliseconds; a naive time is local to ``zone``.

    Accepts what `datetime.fromisoformat` accepts on Python 3.9, plus a trailing
    ``Z`` for UTC. ``None`` means ``now`` (epoch seconds).
    """
    if text is None:
        return int(now * 1000)
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise CliError(
            f"--after {text!r} is not an ISO 8601 time (e.g. 2025-03-30T00:00 or "
            "2025-03-30T00:00:00+02:00)",
            EXIT_USAGE,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return int(moment.timestamp() * 1000)


def format_offset(offset: Optional[timedelta]) -> str:
    """A UTC offset as ``+03:00`` (``+05:30``, ``-03:30``)."""
    minutes = int((offset or timedelta(0)).total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


def fire_rows(fires_ms: list[int], zone: tzinfo, after_ms: int) -> list[dict[str, Any]]:
    """One dict per fire time, with a DST note where the UTC offset changed."""
    rows = []
    previous = datetime.fromtimestamp(after_ms / 1000, tz=timezone.utc).astimezone(zone)
    for ms in fires_ms:
        utc = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
        local = utc.astimezone(zone)
        note = None
        if local.utcoffset() != previous.utcoffset():
            note = (
                f"UTC offset {format_offset(previous.utcoffset())} -> "
                f"{format_offset(local.utcoffset())} (DST change)"
            )
        rows.append(
            {
                "epoch_ms": ms,
                "local": local.isoformat(),
                "utc": utc.isoformat().replace("+00:00", "Z"),
                "zone": local.tzname(),
                "utc_offset": format_offset(local.utcoffset()),
                "note": note,
            }
        )
        previous = local
    return rows


def run(args: argparse.Namespace) -> int:
    """Print the next ``--count`` fire times."""

    try:
        schedule = CronSchedule(args.expression, timezone=args.timezone, dst_fold=args.dst_fold)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    zone = ZoneInfo(args.timezone)  # valid: CronSchedule accepted it
    after_ms = parse_after(args.after, zone, time.time())
    fires: list[int] = []
    cursor = after_ms
    while len(fires) < args.count:
        nxt = schedule.next_after(cursor)
        if nxt is None:
            break
        fires.append(nxt)
        cursor = nxt
    rows = fire_rows(fires, zone, after_ms)
    if args.json:
        emit_json({"expression": args.expression, "timezone": args.timezone, "fires": rows})
        return EXIT_OK
    table = [
        (
            i,
            datetime.fromisoformat(r["local"]).strftime("%Y-%m-%d %H:%M:%S"),
            f"{r['zone']} ({r['utc_offset']})",
            r["utc"].replace("T", " "),
            r["note"] or "",
        )
        for i, r in enumerate(rows, 1)
    ]
    print(f"{args.expression}  in {args.timezone}")
    print(render_table(["#", "LOCAL", "ZONE", "UTC", "NOTE"], table))
    if not rows:
        print("(no further fire times)")
    return EXIT_OK
