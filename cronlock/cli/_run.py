"""``cronlock run module:attr``: run a runner in the foreground until SIGTERM/SIGINT.

``attr`` is a [`CronRunner`][cronlock.runner.CronRunner], or a callable returning one (a factory).
The current directory is importable. Logging goes to stderr (INFO for ``cronlock``
unless ``-v``/``-vv`` ask for more). On SIGTERM or SIGINT the runner stops gracefully
(``--stop-timeout``, default 30 s) and the command exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from typing import Any

from cronlock.cli._common import EXIT_OK, EXIT_USAGE, CliError, add_global_options
from cronlock.runner import CronRunner

NAME = "run"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="run a CronRunner in the foreground (module:attr)",
        description=(
            "Import MODULE, take ATTR (a CronRunner, or a callable returning one), start it "
            "and run until SIGTERM/SIGINT, then stop gracefully. The runner was built with "
            "its Redis client and prefix, so this command takes no --redis-url, --prefix "
            "or --json. Exits 2 when the target cannot be imported or is not a runner."
        ),
    )
    add_global_options(parser, suppress=True, connection=False)
    parser.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="e.g. myapp.jobs:runner; ATTR may be a factory returning the runner",
    )
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, wait this long for running handlers (default: %(default)s)",
    )
    parser.set_defaults(handler=run, resolve_prefix=False)


def load(target: str) -> CronRunner:
    """The runner ``module:attr`` names (calling ``attr`` if it is a factory)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise CliError(f"expected MODULE:ATTR, got {target!r}", EXIT_USAGE)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise CliError(f"cannot import {module_name!r}: {error}", EXIT_USAGE) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CliError(f"{module_name!r} has no attribute {attr!r}", EXIT_USAGE) from None
    if not isinstance(obj, CronRunner) and callable(obj):
        obj = obj()
    if not isinstance(obj, CronRunner):
        raise CliError(f"{target} is not a CronRunner (got {type(obj).__name__})", EXIT_USAGE)
    return obj


def refuse_connection_options(args: argparse.Namespace) -> None:
    """Usage error for ``cronlock --prefix P run ...``: the runner would not use them."""
    given = [
        option
        for option, value in (
            ("--store-url", args.store_url),
            ("--redis-url", args.redis_url),
            ("--prefix", args.prefix),
            ("--json", args.json or None),
        )
        if value is not None
    ]
    if given:
        raise CliError(
            f"{' and '.join(given)} given, but `run` does not use it: the runner in "
            f"{args.target} brings its own Redis client and prefix (set them where it is built)",
            EXIT_USAGE,
        )


def run(args: argparse.Namespace) -> int:
    """Start the runner; stop it on SIGTERM/SIGINT."""
    refuse_connection_options(args)
    if args.verbose <= 0:
        logging.getLogger("cronlock").setLevel(logging.INFO)
    runner = load(args.target)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    runner.start()
    log = logging.getLogger("cronlock.cli")
    log.info(
        "runner %s started: %d job(s), %d task(s); stop with SIGTERM or Ctrl-C",
        runner.runner_id,
        len(runner.jobs),
        len(runner.tasks.names()),
    )
    print(f"cronlock: runner {runner.runner_id} running", flush=True)
    while not stop.wait(1.0):
        pass
    log.info("stopping runner %s (up to %.0f s)", runner.runner_id, args.stop_timeout)
    runner.stop(timeout=args.stop_timeout)
    log.info("runner %s stopped", runner.runner_id)
    return EXIT_OK
