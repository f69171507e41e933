"""The ``cronlock`` command line (also ``python -m cronlock``).

Commands:

```text
cronlock next EXPRESSION [--timezone TZ] [--count N] [--after ISO]
cronlock doctor [--clock-tolerance S]
cronlock exec --key KEY --ttl SECONDS [--wait S] [--grace S]
              [--slot EXPR [--slot-grace S] [--timezone TZ]] -- COMMAND [ARGS...]
cronlock locks [KEY]
cronlock demo [--duration S] [--replicas N] [--no-kill]
cronlock status | jobs | runners | history [KEY] [--limit N]
cronlock pause|resume KEY [--force] | --all;  cronlock trigger KEY [--force] [--expires D]
cronlock forget KEY
cronlock schedule add TASK --cron EXPR|--interval S [...] | list | remove ID
cronlock run MODULE:ATTR [--stop-timeout S]
cronlock store init | check
```

Global options (before or after the command): ``--store-url URL`` (or its older name
``--redis-url``; else ``$CRONLOCK_STORE_URL`` or ``$CRONLOCK_REDIS_URL``, else
``$REDIS_URL``; see `cronlock.cli._connect`: any URL of `cronlock.stores.from_url`, a
Cluster node's ``redis://`` URL detected as a Cluster), ``--prefix`` (else
``$CRONLOCK_PREFIX``, else ``cronlock``), ``--json`` (machine-readable output on stdout),
``-v``/``-vv`` (log to stderr). ``run`` takes only ``-v``: the runner it loads has its
own store and prefix. ``exec`` and ``locks`` need a Redis store (locks exist only there).

Exit codes:

| code     | meaning                                                                          |
|----------|----------------------------------------------------------------------------------|
| 0        | success (doctor: no check failed; exec: the command exited 0)                    |
| 1        | doctor: a check failed; status: no live runner or a job failing; other: an error |
| 2        | usage error: bad option, expression, timezone, store URL, or no store URL given  |
| 3        | refused, nothing written: trigger of a paused job, or pause of a key no runner   |
|          | registered (pass ``--force``)                                                    |
| 69       | the store could not be reached (doctor too; exec: the command was not run)       |
| 70       | an unexpected error inside cronlock (a bug: please report it)                    |
| 75       | exec: the lock is held by another owner, or (``--slot``) the occurrence was      |
|          | already claimed or is past its grace; the command was not run                    |
| 76       | exec: the lock was lost while the command ran; it was sent SIGTERM               |
| 126, 127 | exec: the command could not be executed / was not found                          |
| 128+N    | exec: the command was killed by signal N                                         |
| other    | exec: the command's own exit status                                              |

Adding a command: write a module ``cronlock/cli/_NAME.py`` with
``register(subparsers)`` that adds a parser and ``set_defaults(handler=run)``, where
``run(args) -> int`` returns the exit status (or raises `CliError`), and list it in
`COMMANDS`.
The CLI configures logging (stderr); the library never does.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Optional

import redis

from cronlock._version import __version__
from cronlock.cli._common import (
    EXIT_CODES,
    EXIT_SOFTWARE,
    EXIT_UNAVAILABLE,
    CliError,
    add_global_options,
    resolve_prefix,
)

__all__ = ["COMMANDS", "build_parser", "main"]

#: Modules that each add one command, in ``--help`` order.
COMMANDS: tuple[str, ...] = (
    "cronlock.cli._next_times",
    "cronlock.cli._doctor",
    "cronlock.cli._exec_lock",
    "cronlock.cli._locks",
    "cronlock.cli._status",
    "cronlock.cli._jobs",
    "cronlock.cli._history",
    "cronlock.cli._runners",
    "cronlock.cli._steer",
    "cronlock.cli._forget",
    "cronlock.cli._schedule",
    "cronlock.cli._run",
    "cronlock.cli._store_schema",
    "cronlock.cli._demo",
)


def _epilog() -> str:
    width = max(len(code) for code, _ in EXIT_CODES)
    lines = [f"  {code.ljust(width)}  {meaning}" for code, meaning in EXIT_CODES]
    return "exit codes:\n" + "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The full parser: global options plus one subparser per module in `COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="cronlock",
        description="Run scheduled jobs once across replicas, with Redis deciding who runs.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_global_options(parser, suppress=False)
    parser.set_defaults(resolve_prefix=True)
    subparsers = parser.add_subparsers(dest="command_name", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    try:
        if args.resolve_prefix:
            resolve_prefix(args)
        status = int(args.handler(args))
    except CliError as error:
        print(f"cronlock {args.command_name}: {error}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout closed early (``| head``): not an error worth a traceback.
        sys.stderr.close()
        return 0
    except Exception as error:
        if _unavailable(args, error):
            print(f"cronlock {args.command_name}: {_unavailable(args, error)}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        logging.getLogger("cronlock.cli").exception("unexpected error")
        return EXIT_SOFTWARE
    return status


def _unavailable(args: argparse.Namespace, error: Exception) -> str:
    """What to print when ``error`` means the store could not be reached; "" otherwise."""
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return f"Redis unavailable: {error}"
    store = getattr(args, "store", None)
    errors = () if store is None or isinstance(error, redis.RedisError) else store.errors
    if isinstance(error, errors):  # another store's own errors
        return f"store unavailable ({store!r}): {type(error).__name__}: {error}"
    return ""
