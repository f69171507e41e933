"""The app config: ``CronlockConfig.ready()`` makes the project's runner and finds the jobs."""

from __future__ import annotations

import functools
import logging
import weakref

from django.apps import AppConfig
from django.conf import settings
from django.utils.module_loading import autodiscover_modules

from cronlock import gunicorn as _gunicorn
from cronlock import uwsgi as _uwsgi
from cronlock._autostart import at_exit, stop_at_exit
from cronlock.django import runner as project
from cronlock.django._process import should_autostart
from cronlock.django._settings import Settings, SettingsError, parse_settings
from cronlock.errors import ConfigurationError
from cronlock.runner import CronRunner
from cronlock.stores import from_url

logger = logging.getLogger("cronlock.django")

# Runner arguments the settings name in capitals, to name the right key in errors.
_KEYS = {name: name.upper() for name in ("default_ttl", "max_workers", "after_fork")}
_KEYS.update(prefix="PREFIX", wait_replicas="WAIT_REPLICAS", wait_timeout="WAIT_TIMEOUT")


class CronlockConfig(AppConfig):
    """``"cronlock.django"`` in ``INSTALLED_APPS``.

    ``ready()``: read ``settings.CRONLOCK``, make the [`CronRunner`][cronlock.runner.CronRunner],
    hand it to the gunicorn hooks ([`cronlock.gunicorn.manage`][cronlock.gunicorn.manage]),
    bind [`cronlock.django.runner`][cronlock.django.runner] to it, import every installed
    app's ``jobs`` module, and start the runner if this process serves (see
    [`should_autostart`][cronlock.django.should_autostart]); under uWSGI it is handed
    to [`cronlock.uwsgi.manage`][cronlock.uwsgi.manage] instead, which starts it in each
    worker. A started runner is stopped at interpreter exit.
    """

    name = "cronlock.django"
    label = "cronlock"
    verbose_name = "cronlock"

    def ready(self) -> None:
        """Make, bind and maybe start the project's runner (once per process)."""
        if project.bound:  # a second setup() in one process (some test runners)
            return
        config = parse_settings(getattr(settings, "CRONLOCK", None))
        real = make_runner(config)
        _gunicorn.manage(real, stop_timeout=config.stop_timeout)
        project.bind(real, timezone=config.timezone, stop_timeout=config.stop_timeout)
        at_exit(functools.partial(stop_at_exit, weakref.ref(real), config.stop_timeout))
        autodiscover_modules("jobs")
        start, why = should_autostart(config.autostart, config.autostart_commands)
        project.autostart = (start, why)
        logger.debug("cronlock: autostart=%s (%s), %d job(s)", start, why, len(real.jobs))
        if start and _uwsgi.inside_uwsgi():
            # As the Flask extension does: run in each uWSGI worker, never in a master
            # whose fork() would leave the workers a copy without threads.
            _uwsgi.manage(real, stop_timeout=config.stop_timeout)
        elif start:
            real.start()


def make_runner(config: Settings) -> CronRunner:
    """The runner ``config`` describes; SettingsError naming the key for a bad value."""
    _check_job_defaults(config)
    try:
        store = from_url(config.url, prefix=config.prefix, **config.store_kwargs())
    except ConfigurationError as exc:
        if not str(exc).startswith("prefix"):
            raise SettingsError(f"settings.CRONLOCK[{config.url_key!r}]: {exc}") from exc
        raise SettingsError(f"settings.CRONLOCK['PREFIX']: {exc}") from exc
    except TypeError as exc:
        raise SettingsError(f"settings.CRONLOCK: cannot open the store: {exc}") from exc
    try:
        return CronRunner(store, **config.runner_options)
    except ConfigurationError as exc:
        message = str(exc)
        key = next((k for name, k in _KEYS.items() if message.startswith(name)), None)
        where = f"settings.CRONLOCK[{key!r}]" if key else "settings.CRONLOCK"
        raise SettingsError(f"{where}: {message}") from exc


def _check_job_defaults(config: Settings) -> None:
    # The runner checks these per job; check the defaults once, here, naming the key.
    attempts = config.runner_options["max_attempts"]
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise SettingsError(
            f"settings.CRONLOCK['MAX_ATTEMPTS']: must be an int >= 1; got {attempts!r}"
        )
    overlap = config.runner_options["overlap"]
    if overlap not in ("skip", "allow", "replace"):
        raise SettingsError(
            f"settings.CRONLOCK['OVERLAP']: must be 'skip', 'allow' or 'replace'; got {overlap!r}"
        )
