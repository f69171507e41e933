"""``python manage.py cronlock <command> [...]``: the ``cronlock`` CLI with the project's settings.

Every command of [`cronlock.cli`][cronlock.cli] (``status``, ``jobs``, ``runners``,
``history``, ``pause``, ``resume``, ``trigger``, ``schedule``, ``locks``, ``doctor``,
``next``, ``exec``...) gets ``--redis-url`` and ``--prefix`` from ``settings.CRONLOCK``;
an explicit ``--redis-url`` or ``--prefix`` after the command still wins (``run``
takes neither: the runner it runs was made from the settings).
``manage.py cronlock run`` (no target) runs the project's own runner in the foreground,
a worker process for the jobs (with ``AUTOSTART`` off in the web processes, say).
The exit status is the CLI's.
"""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cronlock.cli import main
from cronlock.django._settings import parse_settings

#: What ``manage.py cronlock run`` runs when no MODULE:ATTR is given.
PROJECT_RUNNER = "cronlock.django:get_runner"


def cli_argv(args: list[str]) -> list[str]:
    """The ``cronlock`` argv for ``manage.py cronlock <args>``: settings first, then ``args``."""
    config = parse_settings(getattr(settings, "CRONLOCK", None))
    args = list(args)
    if args and args[0] == "run":
        # `run` takes no connection options: the runner it loads brings its own.
        if len(args) == 1 or args[1].startswith("-"):
            args.insert(1, PROJECT_RUNNER)
        return args
    return ["--redis-url", config.url, "--prefix", config.prefix, *args]


class Command(BaseCommand):
    """Run a ``cronlock`` CLI command against the project's Redis and prefix."""

    help = (
        "Run a cronlock CLI command with settings.CRONLOCK's URL and prefix, e.g. "
        "'manage.py cronlock status'. 'manage.py cronlock --help' lists the commands."
    )
    requires_system_checks = ()  # an operator's tool: no checks in the way

    def add_arguments(self, parser: CommandParser) -> None:
        """Everything after ``cronlock`` goes to the CLI as it is."""
        parser.add_argument("cli_args", nargs="*", metavar="COMMAND_AND_ARGS")

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py cronlock ...``: bypass Django's parser, so every CLI option passes."""
        sys.exit(main(cli_argv(argv[2:])))

    def handle(self, *args: Any, **options: Any) -> None:
        """``call_command("cronlock", "status")``: CommandError on a non-zero exit."""
        status = main(cli_argv([*args, *options.get("cli_args", [])]))
        if status:
            raise CommandError(f"cronlock exited {status}", returncode=status)
