"""``cronlock exec --slot EXPR``: run a crontab line once per occurrence, not once at a time.

The plain ``cronlock exec`` is a mutex: two hosts whose crontab fired the same fast
command 1.5 s apart both run it, one after the other. With ``--slot`` the command runs
for an *occurrence* of the cron expression, the latest one at or before the host's
clock when cronlock starts, and each occurrence runs at most once across hosts:

```text
1. occurrence T = the latest match of EXPR (in --timezone) at or before now
   now - T > --slot-grace             -> exit 75, nothing run (this firing came too late)
2. acquire the lock KEY, as plain exec does; held elsewhere -> exit 75
3. one script, under the lock: claim T unless T or a later occurrence was claimed
   already claimed (T or later)       -> release, exit 75, nothing run
   now - T > --slot-grace (--wait ran long) -> release, exit 75, nothing run
4. run COMMAND under the lock, as plain exec does (CRONLOCK_SLOT=T in its environment)
```

Why a record of its own rather than the lock's fencing machinery: the fence key expires
60 s after the lock and holds a token, not an occurrence, while the claim must outlive
the run (a fast command's host releases long before a slower host's crontab fires) and
compare occurrences. So the latest claimed occurrence is a small string,
``P:slot:{KEY}`` (epoch ms; it expires ``--slot-grace`` + 7 days after the last claim),
next to the lock under the same hash tag, written by ``exec_slot_claim.lua``. The claim
is made under the lock and the script checks the lock token, so a claim is only ever
written by the lock's current holder, and the command still runs under the lock: a run
that lasts past the next occurrence still keeps that occurrence's hosts out (exit 75),
so that occurrence is skipped, as the runner's default overlap policy does.

On an SQL store (SQLite, PostgreSQL) the record is the ``slot_ms`` column of the lock's
row (`cronlock.stores.sql.leases.claim_occurrence`, one transaction under the lock, the
same replies), kept with the row rather than expiring.

Clocks: each host's own clock decides which occurrence is due and whether it is within
the grace (Redis's clock does not). A host whose clock runs late finds a later
occurrence claimed and skips (``stale``); hosts must agree to well within the grace (NTP).

The default grace is 60 s: cron starts a line within a second or two of its minute, so
a firing more than a minute late (a suspended or overloaded host, a restarted cron
daemon) is not this occurrence's; for an expression with a period under 60 s the latest
occurrence is always less than one period old, so the grace then changes nothing. The
default ``--timezone`` is the host's, as cron's: ``$TZ`` if set, else ``/etc/localtime``,
else UTC.
"""

from __future__ import annotations

import argparse
import enum
import os
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Any, Optional, Union
from zoneinfo import ZoneInfo

from cronlock._durations import seconds_to_ms
from cronlock._keys import LockKeys, exec_slot_key
from cronlock._scripts import Script, text
from cronlock.errors import ConfigurationError
from cronlock.schedules import CronSchedule

__all__ = ["SlotClaim", "SlotPlan", "add_slot_options", "host_zone", "plan_of"]

#: Claim one occurrence under the lock (``exec_slot_claim.lua``).
CLAIM = Script("exec_slot_claim")

DEFAULT_GRACE = 60.0
#: How long the record of the latest claimed occurrence outlives its grace.
RECORD_MS = 7 * 24 * 3600 * 1000
LOCALTIME = "/etc/localtime"


class SlotClaim(str, enum.Enum):
    """The words ``exec_slot_claim.lua`` replies with."""

    CLAIMED = "claimed"
    DONE = "done"
    STALE = "stale"
    LOST = "lost"
    CORRUPT = "corrupt"


def add_slot_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--slot``, ``--slot-grace`` and ``--timezone`` to the ``exec`` parser."""
    parser.add_argument(
        "--slot",
        metavar="EXPR",
        default=None,
        help="run once per occurrence of this cron expression across hosts (the latest at "
        "or before now), not merely one at a time; 6 fields: seconds LAST",
    )
    parser.add_argument(
        "--slot-grace",
        type=float,
        default=None,
        metavar="S",
        help=f"with --slot: do not run an occurrence more than S seconds old "
        f"(default: {DEFAULT_GRACE:g})",
    )
    parser.add_argument(
        "--timezone",
        "--tz",
        default=None,
        metavar="TZ",
        help="with --slot: the expression's IANA timezone (default: the host's, as cron's)",
    )


def host_zone() -> Union[str, tzinfo]:
    """This host's timezone, as cron reads it: ``$TZ``, else ``/etc/localtime``, else UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        return name
    target = os.path.realpath(LOCALTIME)
    if "/zoneinfo/" in target:
        return target.split("/zoneinfo/", 1)[1]
    try:
        with open(LOCALTIME, "rb") as file:
            return ZoneInfo.from_file(file, key="localtime")
    except (OSError, ValueError):
        return "UTC"


@dataclass(frozen=True)
class SlotPlan:
    """The occurrence one ``cronlock exec --slot`` run is for, fixed when it starts."""

    key: str
    prefix: str
    schedule: CronSchedule
    grace_ms: int
    occurrence_ms: Optional[int]

    @property
    def occurrence(self) -> str:
        """The occurrence as ISO-8601 UTC (``2024-05-01T10:05:00Z``), or ``"none"``."""
        return "none" if self.occurrence_ms is None else _iso(self.occurrence_ms)

    def late(self, now_ms: int) -> Optional[str]:
        """Why the occurrence may not run at ``now_ms`` (none, or beyond the grace); else None."""
        if self.occurrence_ms is None:
            return f"{self.schedule.describe()} has no occurrence at or before now"
        age_ms = now_ms - self.occurrence_ms
        if age_ms > self.grace_ms:
            return (
                f"occurrence {self.occurrence} of {self.schedule.describe()} was "
                f"{age_ms / 1000:.1f} s ago, beyond --slot-grace {self.grace_ms / 1000:g} s"
            )
        return None

    def claim(self, client: Any, token: str) -> tuple[SlotClaim, str]:
        """Claim the occurrence while holding the lock ``token`` (one round trip); the reply."""
        assert self.occurrence_ms is not None
        reply = CLAIM(
            client,
            [exec_slot_key(self.prefix, self.key), LockKeys.of(self.prefix, self.key).lock],
            [token, self.occurrence_ms, self.grace_ms + RECORD_MS],
        )
        word = SlotClaim(text(reply[0]))
        return word, text(reply[1]) if len(reply) > 1 else ""

    def refusal(self, word: SlotClaim, detail: str) -> Optional[str]:
        """Why a claim reply means not running; None for a won claim."""
        if word is SlotClaim.CLAIMED:
            return None
        if word is SlotClaim.DONE:
            return f"occurrence {self.occurrence} was already claimed by another run"
        if word is SlotClaim.STALE:
            later = _iso(int(detail)) if detail.isdigit() else detail
            return (
                f"a later occurrence ({later}) than {self.occurrence} was already claimed "
                "(is this host's clock late?)"
            )
        if word is SlotClaim.LOST:
            return f"the lock was lost before occurrence {self.occurrence} was claimed"
        return (
            f"{exec_slot_key(self.prefix, self.key)} holds {detail!r}, which cronlock did "
            "not write; delete it to resume"
        )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def plan_of(args: argparse.Namespace, now_ms: int) -> Optional[SlotPlan]:
    """The ``--slot`` plan from checked options, or None without ``--slot``.

    Raises:
        ConfigurationError, TypeError: a bad ``--slot``, ``--slot-grace`` or
            ``--timezone`` (the message names the value), or those without ``--slot``.
    """
    if args.slot is None:
        for option, value in (("--slot-grace", args.slot_grace), ("--timezone", args.timezone)):
            if value is not None:
                raise ConfigurationError(f"{option} {value!r} needs --slot EXPR")
        return None
    grace = DEFAULT_GRACE if args.slot_grace is None else args.slot_grace
    grace_ms = seconds_to_ms(grace, "--slot-grace", allow_zero=True)
    try:
        CronSchedule(args.slot)  # the expression alone first, so the message blames it
    except ConfigurationError as error:
        raise ConfigurationError(f"--slot: {error}") from None
    zone = host_zone() if args.timezone is None else args.timezone
    try:
        schedule = CronSchedule(args.slot, timezone=zone)
    except ConfigurationError as error:
        option = "--timezone" if args.timezone is not None else "$TZ (pass --timezone)"
        raise ConfigurationError(f"{option}: {error}") from None
    return SlotPlan(
        key=args.key,
        prefix=args.prefix,
        schedule=schedule,
        grace_ms=grace_ms,
        occurrence_ms=schedule.latest_at_or_before(now_ms),
    )
