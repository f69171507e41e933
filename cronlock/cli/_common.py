"""What every command shares: exit codes, the store URL and its connection, tables and JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from cronlock._validate import check_prefix
from cronlock.errors import ConfigurationError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3  # trigger of a paused job, pause of a key no runner has: nothing written
EXIT_UNAVAILABLE = 69  # sysexits EX_UNAVAILABLE: the store could not be reached
EXIT_SOFTWARE = 70  # sysexits EX_SOFTWARE: a bug in cronlock (please report)
EXIT_TEMPFAIL = 75  # sysexits EX_TEMPFAIL: held elsewhere (or occurrence claimed); not run
EXIT_LOCK_LOST = 76  # exec: the lock was lost while the command ran; it was sent SIGTERM
EXIT_NOT_EXECUTABLE = 126  # exec: COMMAND exists but cannot be run (as in sh)
EXIT_NOT_FOUND = 127  # exec: COMMAND not found (as in sh)

#: (code, meaning) for ``cronlock --help`` and the module docstring.
EXIT_CODES: tuple[tuple[str, str], ...] = (
    ("0", "success (doctor: no check failed; exec: the command exited 0)"),
    ("1", "doctor: a check failed; status: no live runner or a job failing; other: an error"),
    ("2", "usage error: bad option, expression, timezone, store URL, or no store URL given"),
    (
        "3",
        "refused, nothing written: trigger of a paused job, or pause of a key no runner "
        "registered (pass --force)",
    ),
    ("69", "the store could not be reached (doctor too; exec: the command was not run)"),
    ("70", "an unexpected error inside cronlock (a bug: please report it)"),
    (
        "75",
        "exec: the lock is held by another owner, or (--slot) the occurrence was already "
        "claimed or is past its grace; the command was not run",
    ),
    ("76", "exec: the lock was lost while the command ran; it was sent SIGTERM"),
    ("126/127", "exec: the command could not be executed / was not found"),
    ("128+N", "exec: the command was killed by signal N"),
    ("other", "exec: the command's own exit status"),
)

STORE_URL_HELP = (
    "where shared state lives: redis://, rediss://, unix://, valkey://, valkeys://, "
    "redis+sentinel://HOST:26379/SERVICE[/DB], a Cluster node (detected; or ?cluster=true), "
    "sqlite:///FILE, or postgresql://USER@HOST/DATABASE[?schema=NAME] (default: "
    "$CRONLOCK_STORE_URL, else $CRONLOCK_REDIS_URL, else $REDIS_URL)"
)
REDIS_URL_HELP = "the same, by its older name (a Redis URL)"
DEFAULT_PREFIX = "cronlock"
PREFIX_HELP = "key prefix (default: $CRONLOCK_PREFIX, else cronlock)"


class CliError(Exception):
    """An error to print as one line on stderr, exiting with ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def resolve_prefix(args: argparse.Namespace) -> None:
    """Set ``args.prefix`` from ``--prefix``, else ``$CRONLOCK_PREFIX``, else ``cronlock``.

    ``args.prefix_from`` records which one it was, for messages. A bad
    ``$CRONLOCK_PREFIX`` is a usage error naming the variable and its value.
    """
    if getattr(args, "prefix", None) is not None:
        args.prefix_from = "--prefix"
        return
    env = os.environ.get("CRONLOCK_PREFIX")
    if env:
        try:
            args.prefix = check_prefix(env)
        except ConfigurationError as error:
            raise CliError(f"$CRONLOCK_PREFIX: {error}", EXIT_USAGE) from None
        args.prefix_from = "CRONLOCK_PREFIX"
    else:
        args.prefix = DEFAULT_PREFIX
        args.prefix_from = "default"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain-text columns aligned with two spaces; the last column is not padded."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def emit_json(data: Any, stream: TextIO | None = None) -> None:
    """Write ``data`` as one JSON document (sorted keys, ISO dates as strings)."""
    out = stream or sys.stdout
    json.dump(data, out, indent=2, sort_keys=True, default=str)
    out.write("\n")


def add_global_options(
    parser: argparse.ArgumentParser, *, suppress: bool, connection: bool = True
) -> None:
    """Options accepted before and after the command name.

    The subcommand copies use ``SUPPRESS`` defaults, so ``cronlock --json doctor`` and
    ``cronlock doctor --json`` both work and neither overrides the other with a default.
    With ``connection=False`` only ``-v`` is added (for ``run``, whose runner brings its
    own client and prefix).
    """

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    if connection:
        parser.add_argument(
            "--store-url", metavar="URL", default=default(None), help=STORE_URL_HELP
        )
        parser.add_argument(
            "--redis-url", metavar="URL", default=default(None), help=REDIS_URL_HELP
        )
        parser.add_argument("--prefix", default=default(None), help=PREFIX_HELP)
        parser.add_argument(
            "--json", action="store_true", default=default(False), help="machine-readable output"
        )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default(0),
        help="log more to stderr (-v INFO, -vv DEBUG)",
    )
