"""Schedules are pure: no redis, no threads, no runtime machinery.

The check runs in a fresh interpreter started with ``-S``: this machine's site
packages (``.pth`` hooks) import ``threading`` at startup, which would hide what
*our* modules import. The ``cronlock`` package ``__init__`` is bypassed on purpose
(a bare package object stands in for it), so the check covers the schedule modules'
own import closure whatever the package later re-exports.

croniter imports dateutil, which imports ``threading``. ``cronlock.schedules._cronexpr`` therefore
imports croniter only when the first cron expression is parsed; after that,
``threading`` is present (imported, never started) and only ``redis`` and cronlock's
runtime modules are asserted absent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import cronlock
from tests import procs

REPO = str(Path(cronlock.__file__).resolve().parent.parent)
RUNTIME = ("redis", "threading", "cronlock.runner", "cronlock.lock", "cronlock.clock")

PRELUDE = """
import sys, types, importlib.util
spec = importlib.util.find_spec('cronlock')
pkg = types.ModuleType('cronlock')
pkg.__path__ = list(spec.submodule_search_locations)
sys.modules['cronlock'] = pkg
"""


def _loaded_after(code: str) -> set[str]:
    paths = [REPO, *[p for p in sys.path if p and "site-packages" in p]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    script = PRELUDE + code + "\nprint(','.join(sorted(sys.modules)))"
    out = procs.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    )
    return set(out.stdout.strip().split(","))


SCHEDULE_MODULES = [
    "cronlock.schedules",
    "cronlock.schedules._base",
    "cronlock.schedules._cron",
    "cronlock.schedules._cronexpr",
    "cronlock.schedules._cronzone",
    "cronlock.schedules._every",
    "cronlock.schedules._interval",
    "cronlock.schedules._once",
]


@pytest.mark.parametrize("module", SCHEDULE_MODULES)
def test_importing_schedule_modules_loads_neither_redis_nor_threading(module: str) -> None:
    """Importing the schedule modules pulls in no redis, no threading, no runtime module."""
    loaded = _loaded_after(f"import {module}")
    assert module in loaded
    # Python 3.13's zoneinfo imports sysconfig, which imports threading: not ours.
    assert not (loaded - _loaded_after("import zoneinfo")) & set(RUNTIME)
    ours = {m for m in loaded if m.startswith("cronlock.")}
    # cronlock._durations: seconds_to_ms, shared with the lock and the runner (pure too).
    assert ours <= {*SCHEDULE_MODULES, "cronlock._durations", "cronlock.errors"}


def test_using_every_kind_of_schedule_loads_no_redis() -> None:
    """Computing interval, cron, one-off and DSL slots never imports redis or the runner."""
    loaded = _loaded_after(
        "from cronlock.schedules import *\n"
        "from cronlock.schedules._every import Every\n"
        "IntervalSchedule(30).next_after(0)\n"
        "CronSchedule('*/5 * * * *', 'Europe/Athens').next_after(0)\n"
        "OnceSchedule(10).next_after(0)\n"
        "Every(1, lambda *a: a, clock=lambda: 0.0).day.at('10:00').do(print)\n"
    )
    assert "croniter" in loaded
    assert not loaded & {"redis", "cronlock.runner", "cronlock.lock", "cronlock.clock"}
