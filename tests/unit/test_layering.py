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


def imports_of(module: str) -> set[str]:
    """Top-level names of everything ``cronlock/<module>.py`` imports (at any depth)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def cronlock_modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


PURE = ["errors", "clock", "schedules", "_cron", "_every"]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_neither_redis_nor_runtime_layers(module: str) -> None:
    """Schedules and their helpers are pure: no redis, no lock, no runner."""
    bad = {
        name
        for name in imports_of(module)
        if name.split(".")[0] == "redis"
        or name in {"cronlock.lock", "cronlock.runner", "cronlock._run", "cronlock.job"}
    }
    assert bad == set()


LOCK_LAYER = ["lock", "exclusive", "_lockwait", "_lockrenew", "_lockinfo", "_renewer", "_scripts"]
ABOVE_LOCK = {"cronlock.runner", "cronlock.job", "cronlock._run", "cronlock.cli", "cronlock.flask"}


@pytest.mark.parametrize("module", [m for m in LOCK_LAYER if (PACKAGE / f"{m}.py").exists()])
def test_the_lock_layer_does_not_reach_up_to_the_runner(module: str) -> None:
    """The lock knows nothing of jobs, the runner or the front ends built on it."""
    assert imports_of(module) & ABOVE_LOCK == set()


@pytest.mark.parametrize("module", cronlock_modules())
def test_only_front_ends_import_the_cli(module: str) -> None:
    """The library never depends on its command line."""
    if module in {"cli", "__main__"}:
        return
    assert not {n for n in imports_of(module) if n.startswith("cronlock.cli")}


def test_importing_cronlock_starts_no_thread() -> None:
    """The library never starts threads at import."""
    code = "import threading, cronlock; print(threading.active_count())"
    out = procs.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "1"
