"""Settings of the test project, from the environment the test sets.

* ``DT_REDIS_URL``, ``DT_PREFIX``: where the runners claim slots.
* ``DT_DB``: the SQLite file (``manage.py migrate`` creates it).
* ``DT_RECORD_DIR``: each process appends JSON lines to ``<dir>/<pid>.jsonl``
  (``tests.history.History`` reads them).
* ``DT_JOBS``: comma-separated ``name:interval_s:duration_s:ttl_s`` (see ``ticks/jobs.py``).
* ``DT_CRONLOCK``: JSON merged into ``CRONLOCK`` (to try bad keys, other options).
"""

from __future__ import annotations

import json
import os

SECRET_KEY = "cronlock-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]  # testserver: django.test.Client
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "cronlock.django",
    "ticks",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "dtproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DT_DB", ":memory:"),
    }
}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/cronlock/"

CRONLOCK = {
    "REDIS_URL": os.environ.get("DT_REDIS_URL", "redis://127.0.0.1:1/0"),
    "PREFIX": os.environ.get("DT_PREFIX", "django-test"),
    "STOP_TIMEOUT": 5,
    "TITLE": "dtproject",
    **json.loads(os.environ.get("DT_CRONLOCK", "{}")),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "cronlock": {"handlers": ["stderr"], "level": os.environ.get("DT_LOG_LEVEL", "WARNING")}
    },
}
