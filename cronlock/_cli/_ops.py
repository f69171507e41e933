"""Helpers shared by the operations commands (status, jobs, history, runners, ...)."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any, Optional

from cronlock._cli._common import EXIT_USAGE, CliError, connect
from cronlock.admin import Admin
from cronlock.errors import ConfigurationError


def admin_for(args: argparse.Namespace) -> Admin:
    """An Admin on the URL and prefix the command line names."""
    try:
        return Admin(connect(args), prefix=args.prefix)
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None


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
