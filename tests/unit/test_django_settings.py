"""settings.CRONLOCK checks and the per-process autostart decision of cronlock.django."""

from __future__ import annotations

from typing import Any, Optional

import pytest

pytest.importorskip("django")

from cronlock.django import SettingsError, django_process, parse_settings, should_autostart
from cronlock.errors import ConfigurationError

URL = "redis://localhost:6379/0"


def test_defaults_fill_in_and_store_url_is_the_same_setting() -> None:
    """Only a URL is needed; STORE_URL is another name for REDIS_URL."""
    config = parse_settings({"STORE_URL": URL})
    assert config.url == URL
    assert (config.prefix, config.timezone, config.autostart) == ("cronlock", "UTC", True)
    assert config.permission is None
    assert config.runner_options["default_ttl"] == 60


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (None, "settings.CRONLOCK is not set"),
        ("redis://x", "must be a dict"),
        ({}, "needs 'REDIS_URL'"),
        ({"REDIS_URL": URL, "PREFX": "x"}, "unknown key 'PREFX'"),
        ({"REDIS_URL": URL, "CRONLOCK_PREFIX": "x"}, "did you mean 'PREFIX'?"),
        ({"REDIS_URL": URL, "API_TOKEN": "x"}, "'API_TOKEN'] is not used here"),
        ({"REDIS_URL": "postgresql://db/app"}, "unsupported scheme 'postgresql'"),
        ({"REDIS_URL": URL, "STORE_URL": "redis://other/0"}, "both 'REDIS_URL' and 'STORE_URL'"),
        ({"REDIS_URL": URL, "AUTOSTART": "yes"}, "['AUTOSTART']: must be True or False; got 'yes'"),
        ({"REDIS_URL": URL, "TIMEZONE": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
        ({"REDIS_URL": URL, "STOP_TIMEOUT": -1}, "['STOP_TIMEOUT']: must be >= 0; got -1"),
        ({"REDIS_URL": URL, "PERMISSION": "staff"}, "'app_label.codename'; got 'staff'"),
        ({"REDIS_URL": URL, "AUTOSTART_COMMANDS": "runserver"}, "list of command names"),
        ({"REDIS_URL": URL, "REDIS_OPTIONS": 5}, "['REDIS_OPTIONS']: must be a dict"),
    ],
    ids=lambda v: None if isinstance(v, str) else repr(v)[:40],
)
def test_bad_settings_are_refused_naming_the_key_or_value(raw: Any, named: str) -> None:
    """Each mistake raises SettingsError (a ConfigurationError and ImproperlyConfigured)."""
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    assert named in str(caught.value)
    assert isinstance(caught.value, ConfigurationError)
    assert isinstance(caught.value, ImproperlyConfigured)


def _decide(argv: Optional[list[str]], env: Optional[dict[str, str]] = None) -> tuple[bool, str]:
    process = django_process(argv=argv, environ=env or {})
    return should_autostart(True, ("runserver",), process)


@pytest.mark.parametrize(
    "command", ["migrate", "makemigrations", "shell", "test", "collectstatic", "check", "cronlock"]
)
def test_manage_py_commands_other_than_runserver_never_start(command: str) -> None:
    """migrate, makemigrations, shell, test, collectstatic, check, cronlock: no autostart."""
    started, why = _decide(["manage.py", command])
    assert started is False
    assert f"'{command}'" in why


def test_runserver_starts_in_the_reloaded_child_only() -> None:
    """runserver: the watcher does not start, its RUN_MAIN child does, --noreload does."""
    assert _decide(["manage.py", "runserver"]) == (
        False,
        "Django autoreloader watcher (the reloaded child runs the jobs)",
    )
    child = _decide(["manage.py", "runserver"], {"RUN_MAIN": "true"})
    assert child == (True, "Django autoreloader child")
    assert _decide(["manage.py", "runserver", "--noreload"])[0] is True
    assert _decide(["manage.py", "runserver", "0:8000", "--norel"])[0] is True


def test_outside_manage_py_it_starts_unless_switched_off() -> None:
    """gunicorn or a script (no manage.py) starts; AUTOSTART off never does."""
    from cronlock._autostart import Process

    assert should_autostart(True, process=Process()) == (True, "CRONLOCK['AUTOSTART'] is on")
    assert should_autostart(False, process=Process()) == (False, "CRONLOCK['AUTOSTART'] is off")
    assert should_autostart(True, ("runserver", "rqworker"), django_process(["m", "rqworker"]))[0]


def test_under_pytest_outside_manage_py_the_command_is_pytest() -> None:
    """pytest-django's django.setup() is not a server: the process counts as 'pytest'."""
    assert django_process(argv=None, environ={}).command == "pytest"
    assert should_autostart(True)[0] is False
