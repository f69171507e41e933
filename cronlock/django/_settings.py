"""``settings.CRONLOCK``: the one settings dict of the Django app, read and checked.

The keys are the Flask extension's ``CRONLOCK_*`` keys without the prefix, plus two of
Django's own (``PERMISSION``, ``AUTOSTART_COMMANDS``). An unknown key, a missing URL or
a bad value raises [`SettingsError`][cronlock.django.SettingsError] naming it, when
Django starts (``django.setup()``: every ``manage.py`` command, every server process).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from django.core.exceptions import ImproperlyConfigured

from cronlock._redisurl import masked, scheme_of
from cronlock.errors import ConfigurationError
from cronlock.options import RUNNER_DEFAULTS
from cronlock.stores.urls import STORE_SCHEMES, is_redis_url

__all__ = ["DEFAULTS", "Settings", "SettingsError", "parse_settings"]

#: Every key ``settings.CRONLOCK`` may hold, with its default. ``REDIS_URL`` and
#: ``STORE_URL`` are two names for the same thing (one is required); ``REDIS_URL``
#: takes Redis URLs only, ``STORE_URL`` any URL of `cronlock.stores.from_url`.
DEFAULTS: dict[str, Any] = {
    "REDIS_URL": None,
    "STORE_URL": None,
    "REDIS_OPTIONS": {"socket_timeout": 10, "socket_connect_timeout": 5},
    "STORE_OPTIONS": {},
    "PREFIX": "cronlock",
    "DEFAULT_TTL": RUNNER_DEFAULTS["ttl"],
    "TIMEZONE": "UTC",
    "AUTOSTART": True,
    "AUTOSTART_COMMANDS": ("runserver",),
    "MAX_WORKERS": 8,
    "MAX_ATTEMPTS": RUNNER_DEFAULTS["max_attempts"],
    "OVERLAP": RUNNER_DEFAULTS["overlap"],
    "AFTER_FORK": "restart",
    "STOP_TIMEOUT": 30,
    "WAIT_REPLICAS": 0,
    "WAIT_TIMEOUT": 1.0,
    "PERMISSION": None,
    "TITLE": "cronlock",
}

# Flask keys that mean nothing here, with what to use instead.
_NOT_HERE = {
    "API_TOKEN": "the Django views use Django's own login: see 'PERMISSION'",
}


class SettingsError(ConfigurationError, ImproperlyConfigured):
    """A bad ``settings.CRONLOCK``: both a cronlock `ConfigurationError` and Django's
    ``ImproperlyConfigured``, so either ``except`` catches it."""


@dataclass(frozen=True)
class Settings:
    """``settings.CRONLOCK`` after checking, every key filled in.

    Attributes:
        url: the store URL (``STORE_URL`` or ``REDIS_URL``).
        redis_options: keyword arguments for the redis-py client (a Redis URL only).
        prefix: the key namespace every replica of the project shares.
        timezone: the timezone of ``@runner.cron`` jobs that pass none.
        autostart: start the runner in processes that serve (see ``should_autostart``).
        autostart_commands: the ``manage.py`` commands that serve or work.
        stop_timeout: seconds a stop (at exit, in gunicorn's ``worker_exit``) waits.
        permission: the permission the views require (None: ``is_staff``).
        title: the dashboard's heading.
        runner_options: keyword arguments for [`CronRunner`][cronlock.runner.CronRunner].
    """

    url: str
    redis_options: dict[str, Any]
    prefix: str
    timezone: str
    autostart: bool
    autostart_commands: tuple[str, ...]
    stop_timeout: float
    permission: Optional[str]
    title: str
    runner_options: dict[str, Any] = field(default_factory=dict)
    store_options: dict[str, Any] = field(default_factory=dict)
    url_key: str = "STORE_URL"  # which key named the URL, for messages

    def store_kwargs(self) -> dict[str, Any]:
        """What `cronlock.stores.from_url` is given besides the URL and the prefix."""
        redis = dict(self.redis_options) if is_redis_url(self.url) else {}
        return {**redis, **self.store_options}


def _fail(key: str, message: str) -> SettingsError:
    return SettingsError(f"settings.CRONLOCK[{key!r}]: {message}")


def _url(values: Mapping[str, Any]) -> tuple[str, str]:
    redis_url, store_url = values.get("REDIS_URL"), values.get("STORE_URL")
    if redis_url and store_url and redis_url != store_url:
        raise SettingsError(
            "settings.CRONLOCK sets both 'REDIS_URL' and 'STORE_URL' to different URLs "
            f"({masked(str(redis_url))!r}, {masked(str(store_url))!r}): they are two names "
            "for one setting; keep one"
        )
    key = "REDIS_URL" if redis_url else "STORE_URL"
    url = redis_url or store_url
    if not url:
        raise SettingsError(
            "settings.CRONLOCK needs 'REDIS_URL' (or 'STORE_URL'), "
            "e.g. CRONLOCK = {'REDIS_URL': 'redis://localhost:6379/0'}"
        )
    if not isinstance(url, str):
        raise _fail(key, f"must be a URL string; got {url!r}")
    scheme = scheme_of(url)
    if key == "REDIS_URL" and not is_redis_url(url) and scheme in STORE_SCHEMES:
        raise _fail(
            key,
            f"unsupported scheme {scheme!r} in {masked(url)!r}: 'REDIS_URL' takes a Redis URL "
            "(use 'STORE_URL' for another store)",
        )
    if scheme not in STORE_SCHEMES:
        raise _fail(
            key,
            f"unsupported scheme {scheme!r} in {masked(url)!r}: cronlock.django keeps its "
            f"state in a store ({', '.join(s + '://' for s in STORE_SCHEMES)})",
        )
    return key, url


def parse_settings(raw: Any) -> Settings:
    """Check ``settings.CRONLOCK`` (``raw``) and fill in the defaults.

    Raises:
        SettingsError: ``raw`` is missing or not a dict, holds an unknown key, lacks
            the URL, or holds a value of the wrong kind (the message names the key and
            the value). Values the runner checks itself (``DEFAULT_TTL``, ``OVERLAP``,
            ...) are checked again when the runner is made, with the same naming.

    Example:
        ```python
        parse_settings({"REDIS_URL": "redis://localhost:6379/0", "PREFX": "shop"})
        # SettingsError: settings.CRONLOCK has an unknown key 'PREFX'; known keys: ...
        ```
    """
    if raw is None:
        raise SettingsError(
            "cronlock.django is in INSTALLED_APPS but settings.CRONLOCK is not set: "
            "add CRONLOCK = {'REDIS_URL': 'redis://localhost:6379/0'}"
        )
    if not isinstance(raw, Mapping):
        raise SettingsError(f"settings.CRONLOCK must be a dict; got {raw!r}")
    _check_keys(raw)
    values = {**DEFAULTS, **raw}
    url_key, url = _url(values)
    options = values["REDIS_OPTIONS"]
    if not isinstance(options, Mapping):
        raise _fail("REDIS_OPTIONS", f"must be a dict of redis.Redis arguments; got {options!r}")
    store_options = values["STORE_OPTIONS"]
    if not isinstance(store_options, Mapping):
        raise _fail(
            "STORE_OPTIONS", f"must be a dict of the store's arguments; got {store_options!r}"
        )
    autostart = values["AUTOSTART"]
    if not isinstance(autostart, bool):
        raise _fail("AUTOSTART", f"must be True or False; got {autostart!r}")
    commands = values["AUTOSTART_COMMANDS"]
    if isinstance(commands, str) or not all(isinstance(c, str) and c for c in commands):
        raise _fail("AUTOSTART_COMMANDS", f"must be a list of command names; got {commands!r}")
    timezone = values["TIMEZONE"]
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, TypeError, ValueError):
        raise _fail("TIMEZONE", f"unknown timezone {timezone!r}") from None
    stop_timeout = values["STOP_TIMEOUT"]
    if isinstance(stop_timeout, bool) or not isinstance(stop_timeout, (int, float)):
        raise _fail("STOP_TIMEOUT", f"must be a number of seconds; got {stop_timeout!r}")
    if stop_timeout < 0:
        raise _fail("STOP_TIMEOUT", f"must be >= 0; got {stop_timeout!r}")
    permission = values["PERMISSION"]
    if permission is not None and (not isinstance(permission, str) or "." not in permission):
        raise _fail(
            "PERMISSION",
            f"must be None (staff users) or 'app_label.codename'; got {permission!r}",
        )
    title = values["TITLE"]
    if not isinstance(title, str):
        raise _fail("TITLE", f"must be a string; got {title!r}")
    return Settings(
        url=url,
        redis_options=dict(options),
        prefix=values["PREFIX"],
        timezone=timezone,
        autostart=autostart,
        autostart_commands=tuple(commands),
        stop_timeout=float(stop_timeout),
        permission=permission,
        title=title,
        runner_options={
            "prefix": values["PREFIX"],
            "default_ttl": values["DEFAULT_TTL"],
            "max_workers": values["MAX_WORKERS"],
            "max_attempts": values["MAX_ATTEMPTS"],
            "overlap": values["OVERLAP"],
            "after_fork": values["AFTER_FORK"],
            "wait_replicas": values["WAIT_REPLICAS"],
            "wait_timeout": values["WAIT_TIMEOUT"],
        },
        store_options=dict(store_options),
        url_key=url_key,
    )


def _check_keys(raw: Mapping[str, Any]) -> None:
    for key in raw:
        if key in _NOT_HERE:
            raise SettingsError(f"settings.CRONLOCK[{key!r}] is not used here: {_NOT_HERE[key]}")
        if key not in DEFAULTS:
            flask_name = isinstance(key, str) and key.startswith("CRONLOCK_")
            hint = f" (did you mean {key[len('CRONLOCK_') :]!r}?)" if flask_name else ""
            raise SettingsError(
                f"settings.CRONLOCK has an unknown key {key!r}{hint}; "
                f"known keys: {', '.join(sorted(DEFAULTS))}"
            )
