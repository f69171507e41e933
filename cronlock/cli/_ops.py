"""Helpers shared by the operations commands (status, jobs, history, runners, ...)."""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from typing import Any, Optional

from cronlock.admin import Admin
from cronlock.cli._common import EXIT_USAGE, CliError
from cronlock.cli._connect import open_store
from cronlock.errors import ConfigurationError


def admin_for(args: argparse.Namespace) -> Admin:
    """An Admin on the URL and prefix the command line names."""
    try:
        return Admin(open_store(args), prefix=args.prefix)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None


def elsewhere(admin: Admin, *, runners_here: Optional[int] = None) -> Optional[str]:
    """Why nothing was found, when the likely reason is the prefix; else None.

    ``no runners under prefix 'cronlock'; runners found under 'myapp' (use --prefix
    myapp)``, when no runner is alive under ``admin.prefix`` and a bounded SCAN finds
    some under other prefixes (a Redis store only: it can list every prefix). Never
    raises for what the store says (an ACL may refuse SCAN): the hint is then left out.
    """
    scan = getattr(admin.store, "prefixes_with_runners", None)
    if scan is None:
        return None
    try:
        if runners_here is None:
            runners_here = len(admin.runners())
        if runners_here:
            return None
        others = {p: n for p, n in scan().items() if p != admin.prefix}
    except admin.store.errors:
        return None
    if not others:
        return None
    names = list(others)
    shown = ", ".join(repr(p) for p in names[:5]) + (
        f" and {len(names) - 5} more" if len(names) > 5 else ""
    )
    use = " or ".join(f"--prefix {shlex.quote(p)}" for p in names[:2])
    return f"no runners under prefix {admin.prefix!r}; runners found under {shown} (use {use})"


def hint_elsewhere(
    args: argparse.Namespace, admin: Admin, *, runners_here: Optional[int] = None
) -> bool:
    """Print `elsewhere`'s hint on stderr, if there is one; True if printed."""
    hint = elsewhere(admin, runners_here=runners_here)
    if hint is not None:
        print(f"cronlock {args.command_name}: {hint}", file=sys.stderr)
    return hint is not None


def when(value: Optional[datetime]) -> str:
    """A UTC time for tables: ``2024-05-01 12:00:00Z``, or ``-``."""
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def ago(value: Optional[datetime]) -> str:
    """``12s ago`` / ``in 3m`` style, for humans."""
    if value is None:
        return "-"
    delta = (value - datetime.now(timezone.utc)).total_seconds()
    n = abs(delta)
    text = f"{n:.0f}s" if n < 120 else f"{n / 60:.0f}m" if n < 7200 else f"{n / 3600:.0f}h"
    return f"in {text}" if delta > 0 else f"{text} ago"


def short(value: Any, width: int = 40) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"
