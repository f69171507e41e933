"""Configuration and process decisions of the Flask extension [`cronlock.flask`][cronlock.flask]."""

from __future__ import annotations

import os
from typing import Any, Optional

import click
from flask import Flask

from cronlock._autostart import Framework, Process, at_exit, decide, stop_at_exit
from cronlock._redisurl import masked
from cronlock.errors import ConfigurationError
from cronlock.options import RUNNER_DEFAULTS
from cronlock.stores import Store, from_url
from cronlock.stores.urls import is_redis_url

#: Every configuration key the extension reads, with its default (the job defaults are
#: the option table's, `cronlock.options.RUNNER_DEFAULTS`).
DEFAULTS: dict[str, Any] = {
    "CRONLOCK_STORE_URL": None,
    "CRONLOCK_STORE_OPTIONS": {},
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
__all__ = ["DEFAULTS", "at_exit", "should_autostart", "stop_at_exit", "store_from_config"]


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


def store_url(cfg: Any) -> str:
    """``CRONLOCK_STORE_URL``, or its older name ``CRONLOCK_REDIS_URL`` (Redis URLs only).

    Both set to different URLs is a ConfigurationError naming both (passwords masked).
    """
    store, redis_url = cfg.get("CRONLOCK_STORE_URL"), cfg.get("CRONLOCK_REDIS_URL")
    if store and redis_url and store != redis_url:
        raise ConfigurationError(
            f"CRONLOCK_STORE_URL ({masked(str(store))!r}) and CRONLOCK_REDIS_URL "
            f"({masked(str(redis_url))!r}) differ: they are two names for one setting; keep one"
        )
    if redis_url and not store and isinstance(redis_url, str) and _other_store(redis_url):
        raise ConfigurationError(
            f"CRONLOCK_REDIS_URL takes a Redis URL; got {masked(redis_url)!r} "
            "(set CRONLOCK_STORE_URL for another store)"
        )
    url = store or redis_url
    if not url:
        raise ConfigurationError(
            "cronlock needs a store: set app.config['CRONLOCK_STORE_URL'] (or its older name "
            "CRONLOCK_REDIS_URL), e.g. 'redis://localhost:6379/0' or 'sqlite:///jobs.db', "
            "or pass CronLock(client=...)"
        )
    if not isinstance(url, str):
        raise ConfigurationError(f"CRONLOCK_STORE_URL must be a URL string; got {url!r}")
    return url


def _other_store(url: str) -> bool:
    return url.lower().startswith(("sqlite:", "postgres:", "postgresql:"))


def store_from_config(cfg: Any) -> Store:
    """The store the app's configuration names, with ``CRONLOCK_PREFIX``.

    For a Redis URL the client gets ``CRONLOCK_REDIS_OPTIONS``; every store gets
    ``CRONLOCK_STORE_OPTIONS`` (keyword arguments of its constructor, or of the client).
    """
    url = store_url(cfg)
    options = dict(cfg.get("CRONLOCK_REDIS_OPTIONS") or {}) if is_redis_url(url) else {}
    options.update(cfg.get("CRONLOCK_STORE_OPTIONS") or {})
    return from_url(url, prefix=cfg.get("CRONLOCK_PREFIX", "cronlock"), **options)
