"""Configuration and process decisions of the Flask extension [`cronlock.flask`][cronlock.flask]."""

from __future__ import annotations

import os
from typing import Any, Optional

import click
from flask import Flask

from cronlock._autostart import Framework, Process, at_exit, decide, stop_at_exit
from cronlock._redisurl import client_from_url
from cronlock.errors import ConfigurationError
from cronlock.options import RUNNER_DEFAULTS

#: Every configuration key the extension reads, with its default (the job defaults are
#: the option table's, `cronlock.options.RUNNER_DEFAULTS`).
DEFAULTS: dict[str, Any] = {
    "CRONLOCK_REDIS_URL": None,
    "CRONLOCK_REDIS_OPTIONS": {"socket_timeout": 10, "socket_connect_timeout": 5},
    "CRONLOCK_PREFIX": "cronlock",
    "CRONLOCK_DEFAULT_TTL": RUNNER_DEFAULTS["ttl"],
    "CRONLOCK_TIMEZONE": "UTC",
    "CRONLOCK_AUTOSTART": False,
    "CRONLOCK_MAX_WORKERS": 8,
    "CRONLOCK_MAX_ATTEMPTS": RUNNER_DEFAULTS["max_attempts"],
    "CRONLOCK_OVERLAP": RUNNER_DEFAULTS["overlap"],
    "CRONLOCK_AFTER_FORK": "restart",
    "CRONLOCK_STOP_TIMEOUT": 30,
    "CRONLOCK_WAIT_REPLICAS": 0,
    "CRONLOCK_WAIT_TIMEOUT": 1.0,
    "CRONLOCK_API_TOKEN": None,
}


_FLASK = Framework("CRONLOCK_AUTOSTART", "flask", ("run",), "Werkzeug reloader")

#: Re-exported for the extension (they live in `cronlock._autostart`, shared with Django).
__all__ = ["DEFAULTS", "at_exit", "client_from_config", "should_autostart", "stop_at_exit"]


def should_autostart(app: Flask, environ: Optional[dict[str, str]] = None) -> tuple[bool, str]:
    """Whether ``CRONLOCK_AUTOSTART`` may start the runner in this process, and why.

    * Werkzeug's reloader child (``WERKZEUG_RUN_MAIN=true``): yes, it serves the app.
    * Under the ``flask`` command (``FLASK_RUN_FROM_CLI=true``): only for ``flask run``,
      and only without the reloader (with it, this process is the watcher; the child
      it spawns starts the jobs). ``flask shell``, ``flask db upgrade``...: no.
    * Anywhere else (gunicorn, uWSGI, a script): yes.
    """
    env = os.environ if environ is None else environ
    process = Process()
    if env.get("WERKZEUG_RUN_MAIN") == "true":
        process = Process(reloader_child=True)
    elif env.get("FLASK_RUN_FROM_CLI") == "true":
        ctx = click.get_current_context(silent=True)
        command = ctx.command.name if ctx is not None and ctx.command is not None else None
        reload = ctx.params.get("reload") if ctx is not None else None
        if reload is None:
            reload = bool(app.debug) or os.environ.get("FLASK_DEBUG", "") in ("1", "true")
        process = Process(command=command or "?", reloader_watcher=bool(reload))
    return decide(bool(app.config.get("CRONLOCK_AUTOSTART")), process, _FLASK)


def client_from_config(cfg: Any) -> Any:
    url = cfg.get("CRONLOCK_REDIS_URL")
    if not url:
        raise ConfigurationError(
            "cronlock needs Redis: set app.config['CRONLOCK_REDIS_URL'] "
            "(e.g. 'redis://localhost:6379/0') or pass CronLock(client=...)"
        )
    options = dict(cfg.get("CRONLOCK_REDIS_OPTIONS") or {})
    return client_from_url(url, **options)
