"""Which processes start a web framework's runner by themselves, and the stop at exit.

Shared by the Flask extension ([`cronlock.flask`][cronlock.flask]) and the Django app
([`cronlock.django`][cronlock.django]). An app is loaded by many processes that never
serve it: a migration, a shell, a test run, the file watcher of a development server's
reloader. Each integration describes the process it is loaded in as a `Process` (from
its own CLI's state) and `decide` answers whether the runner may start there, and why:

* autostart switched off: never;
* a reloader's child (it serves the app, and is restarted on each code change): yes;
* under the framework's own command line: only for a command that serves (``flask
  run``, ``manage.py runserver``), and not in the reloader's watcher (the child it
  spawns starts the jobs); ``shell``, migrations, tests: no;
* anywhere else (gunicorn, uWSGI, a script): yes.

No framework is imported here, and nothing is started: the integrations do that.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Collection
from dataclasses import dataclass
from typing import Callable, Optional

from cronlock.runner import CronRunner

__all__ = ["Framework", "Process", "at_exit", "decide", "stop_at_exit"]


@dataclass(frozen=True)
class Framework:
    """How an integration names things in the reasons `decide` gives.

    Attributes:
        setting: the switch, as users write it (``"CRONLOCK_AUTOSTART"``).
        cli: the framework's command line (``"flask"``, ``"manage.py"``).
        serve_commands: the commands of that CLI whose process serves or works.
        reloader: the development reloader's name (``"Werkzeug reloader"``).
    """

    setting: str
    cli: str
    serve_commands: Collection[str]
    reloader: str


@dataclass(frozen=True)
class Process:
    """What an integration knows about the process that loads the app.

    Attributes:
        command: the framework CLI command this process runs (``"run"``, ``"migrate"``;
            ``"?"`` when the CLI cannot tell), or None outside that CLI (gunicorn, uWSGI,
            a script).
        reloader_child: a development reloader started this process to serve the app.
        reloader_watcher: this process only watches files and restarts the reloader's child.
    """

    command: Optional[str] = None
    reloader_child: bool = False
    reloader_watcher: bool = False


def decide(enabled: bool, process: Process, framework: Framework) -> tuple[bool, str]:
    """Whether the runner may start in ``process``, and why (the rules in the module docstring).

    Example:
        ```python
        flask = Framework("CRONLOCK_AUTOSTART", "flask", {"run"}, "Werkzeug reloader")
        decide(True, Process(command="shell"), flask)
        # (False, "flask CLI command 'shell' (jobs run under 'flask run')")
        ```
    """
    if not enabled:
        return False, f"{framework.setting} is off"
    if process.reloader_child:
        return True, f"{framework.reloader} child"
    command = process.command
    if command is not None:
        if command not in framework.serve_commands:
            names = sorted(framework.serve_commands)
            serving = " or ".join(f"'{framework.cli} {name}'" for name in names)
            return False, f"{framework.cli} CLI command {command!r} (jobs run under {serving})"
        if process.reloader_watcher:
            return False, f"{framework.reloader} watcher (the reloaded child runs the jobs)"
        return True, f"{framework.cli} {command} without reloader"
    return True, f"{framework.setting} is on"


def at_exit(callback: Callable[[], None]) -> None:
    """Call ``callback`` at interpreter exit, before the runner's worker threads are joined.

    Plain ``atexit`` runs after ``threading`` has joined every ThreadPoolExecutor thread,
    so a handler still running would hold the exit until it returned by itself.
    ``threading._register_atexit`` (what concurrent.futures uses, 3.9+) runs callbacks
    newest first, before those joins; it is private, so fall back to ``atexit``.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(callback)
            return
        except RuntimeError:  # interpreter already shutting down
            return
    atexit.register(callback)


def stop_at_exit(ref: weakref.ref[CronRunner], timeout: float) -> None:
    """Stop the runner ``ref`` points to, if it is still alive and running."""
    runner = ref()
    if runner is not None and runner.running:
        runner.stop(timeout=timeout)
