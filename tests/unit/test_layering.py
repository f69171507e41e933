"""The dependency direction of the package, read from the source (no imports run).

errors <- clock <- schedules (pure) <- scripts/keys <- lock <- runner <- flask / cli
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests import procs

PACKAGE = Path(__file__).resolve().parents[2] / "cronlock"


def all_modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (packages by their name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = all_modules()


def imports_of(module: str) -> set[str]:
    """Everything ``module`` imports, at any depth (``from m import n``: both m and m.n)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def in_part(name: str, part: str) -> bool:
    return name == part or name.startswith(part + ".")


def modules_of(*parts: str) -> list[str]:
    return [m for m in MODULES if any(in_part(m, part) for part in parts)]


SCHEDULES = modules_of("cronlock.schedules")


@pytest.mark.parametrize("module", SCHEDULES)
def test_schedules_import_neither_redis_nor_threads_nor_other_parts(module: str) -> None:
    """Schedules are pure: no redis, no threading, of cronlock only errors and durations."""
    bad = {
        name
        for name in imports_of(module)
        if name.split(".")[0] in {"redis", "threading"}
        or (
            in_part(name, "cronlock")
            and not in_part(name, "cronlock.schedules")
            and not in_part(name, "cronlock.errors")
            and not in_part(name, "cronlock._durations")
        )
    }
    assert bad == set()


@pytest.mark.parametrize("module", ["cronlock.errors", "cronlock.clock"])
def test_errors_and_clock_import_no_other_part(module: str) -> None:
    """The base of the house: errors and the clock import no redis and no other part."""
    bad = {
        name
        for name in imports_of(module)
        if name.split(".")[0] == "redis"
        or (in_part(name, "cronlock") and not in_part(name, "cronlock.errors"))
    }
    assert bad == set()


# `cronlock.exclusive` is a front end: it picks a store (client, store, URL), so it sits
# above both the lock and the stores.
LOCK_LAYER = [
    *modules_of("cronlock.lock"),
    "cronlock._scripts",
    "cronlock._keys",
]
#: What the lock layer must never import: the runner and everything built on it.
ABOVE_LOCK = (
    "cronlock.runner",
    "cronlock.job",
    "cronlock._run",
    "cronlock._scheduler",
    "cronlock._events",
    "cronlock._dynamic",
    "cronlock._registry",
    "cronlock._claims",
    "cronlock.health",
    "cronlock.admin",
    "cronlock.history",
    "cronlock.doctor",
    "cronlock.stores",
    "cronlock.ops",
    "cronlock.cli",
    "cronlock.testing",
    "cronlock.flask",
    "cronlock._flask",
    "cronlock.gunicorn",
    "cronlock.metrics",
    "cronlock.postgres",
)


@pytest.mark.parametrize("module", LOCK_LAYER)
def test_the_lock_layer_does_not_reach_up_to_the_runner(module: str) -> None:
    """The lock knows nothing of jobs, the runner or the front ends built on it."""
    assert {n for n in imports_of(module) if any(in_part(n, up) for up in ABOVE_LOCK)} == set()


@pytest.mark.parametrize("module", list(MODULES))
def test_only_front_ends_import_the_cli(module: str) -> None:
    """The library never depends on its command line; front ends (Django's
    ``manage.py cronlock``) may."""
    if in_part(module, "cronlock.cli") or module == "cronlock.__main__":
        return
    if module == "cronlock.django.management.commands.cronlock":
        return
    assert not {n for n in imports_of(module) if in_part(n, "cronlock.cli")}


@pytest.mark.parametrize("module", list(MODULES))
def test_the_library_does_not_import_its_test_helpers(module: str) -> None:
    """`cronlock.testing` (servers, proxies) is for tests and the demo, not the library."""
    if in_part(module, "cronlock.testing") or in_part(module, "cronlock.cli"):
        return
    assert not {n for n in imports_of(module) if in_part(n, "cronlock.testing")}


def test_importing_cronlock_starts_no_thread() -> None:
    """The library never starts threads at import."""
    code = "import threading, cronlock; print(threading.active_count())"
    out = procs.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "1"
