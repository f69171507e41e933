"""The Django app: add ``"cronlock.django"`` to ``INSTALLED_APPS``, declare jobs in ``jobs.py``.

```python
# settings.py
INSTALLED_APPS = [..., "cronlock.django"]
CRONLOCK = {"REDIS_URL": "redis://localhost:6379/0", "PREFIX": "shop"}

# shop/jobs.py (found in every installed app, like admin.py)
from cronlock.django import runner

@runner.cron("*/5 * * * *", key="sync-users")
def sync_users(ctx):
    ...                                   # the ORM works; connections are tidied per run

# urls.py: the dashboard and management API, staff only by default
urlpatterns = [path("cronlock/", include("cronlock.django.urls")), ...]
```

When Django is ready, the app makes the project's [`CronRunner`][cronlock.runner.CronRunner]
from ``settings.CRONLOCK``, hands it to the [`cronlock.gunicorn`][cronlock.gunicorn]
hooks, imports every app's ``jobs`` module and starts the runner in the processes that
serve (gunicorn or uWSGI workers, ``runserver``'s reloaded child): never in
``migrate``, ``shell``, ``test`` or any other ``manage.py`` command (see
[`should_autostart`][cronlock.django.should_autostart]). ``python manage.py cronlock
<command>`` is the ``cronlock`` CLI with the settings' URL and prefix.

Importing this module imports Django but reads no setting and starts nothing.
"""

from __future__ import annotations

from cronlock.django._process import django_process, should_autostart
from cronlock.django._runner import ProjectRunner, with_fresh_connections
from cronlock.django._settings import DEFAULTS, Settings, SettingsError, parse_settings
from cronlock.runner import CronRunner

__all__ = [
    "DEFAULTS",
    "ProjectRunner",
    "Settings",
    "SettingsError",
    "django_process",
    "get_runner",
    "parse_settings",
    "runner",
    "should_autostart",
    "with_fresh_connections",
]

runner = ProjectRunner()
"""The project's runner (a [`ProjectRunner`][cronlock.django.ProjectRunner]): register jobs on it
in ``jobs.py`` modules; it runs them once Django is ready."""


def get_runner() -> CronRunner:
    """The project's real runner once Django is ready (what ``manage.py cronlock run`` runs)."""
    return runner.runner
