"""Which process Django is starting in, for the autostart decision (`cronlock._autostart`).

``CronlockConfig.ready()`` runs inside ``django.setup()``. Under ``manage.py`` (or
``django-admin``, ``python -m django``) that call is made by
``ManagementUtility.execute()``, which holds the command line: the subcommand is
read from there rather than from ``sys.argv`` (a ``manage.py`` may have any name). The
autoreloader of ``runserver`` marks its serving child with ``RUN_MAIN=true``; the
parent without it only watches files.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Mapping
from typing import Optional

from django.core.management import ManagementUtility

from cronlock._autostart import Framework, Process, decide

__all__ = ["django_process", "should_autostart"]


def management_argv() -> Optional[list[str]]:
    """The argv of the ``ManagementUtility`` this call runs under, or None outside one."""
    target = ManagementUtility.execute.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is target:
            argv = getattr(frame.f_locals.get("self"), "argv", None)
            if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
                return argv
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _no_reload(args: list[str]) -> bool:
    """``runserver --noreload`` (argparse also takes an unambiguous prefix such as ``--norel``)."""
    return any(a.startswith("--nor") and "--noreload".startswith(a) for a in args)


def django_process(
    argv: Optional[list[str]] = None, environ: Optional[Mapping[str, str]] = None
) -> Process:
    """This process as the autostart decision sees it.

    Args:
        argv: the management command line (default: the running ``ManagementUtility``'s,
            None outside ``manage.py``).
        environ: the environment (default ``os.environ``).

    Under pytest (``pytest-django`` calls ``django.setup()`` itself), the command is
    ``"pytest"``: a test run never starts jobs by itself.
    """
    env = os.environ if environ is None else environ
    if argv is None:
        argv = management_argv()
    if env.get("RUN_MAIN") == "true":
        return Process(command=argv[1] if argv and len(argv) > 1 else None, reloader_child=True)
    if argv is None:
        return Process(command="pytest") if "_pytest" in sys.modules else Process()
    command = argv[1] if len(argv) > 1 else "help"
    watcher = command == "runserver" and not _no_reload(argv[2:])
    return Process(command=command, reloader_watcher=watcher)


def should_autostart(
    enabled: bool,
    serve_commands: Collection[str] = ("runserver",),
    process: Optional[Process] = None,
) -> tuple[bool, str]:
    """Whether the runner starts in this process, and why.

    * ``AUTOSTART`` off: never.
    * ``runserver``'s autoreloaded child (``RUN_MAIN=true``): yes; its file watcher: no.
    * ``manage.py runserver --noreload`` and the other ``AUTOSTART_COMMANDS``: yes.
    * Every other ``manage.py`` command (``migrate``, ``makemigrations``, ``shell``,
      ``test``, ``collectstatic``, ``check``, ``cronlock``...) and pytest: no.
    * Anywhere else (gunicorn, uWSGI, a script calling ``django.setup()``): yes.
    """
    framework = Framework(
        "CRONLOCK['AUTOSTART']", "manage.py", tuple(serve_commands), "Django autoreloader"
    )
    return decide(enabled, django_process() if process is None else process, framework)
