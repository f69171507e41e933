"""The dependency direction of the package: pure modules stay pure."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = ["cronlock.errors", "cronlock.clock"]


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_neither_redis_nor_threads(module: str) -> None:
    """Pure modules import neither redis nor threading-heavy runtime machinery."""
    code = (
        "import sys, importlib; importlib.import_module(%r); "
        "print(','.join(m for m in ('redis', 'cronlock.runner', 'cronlock.lock') "
        "if m in sys.modules))" % module
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_importing_cronlock_starts_no_thread() -> None:
    """The library never starts threads at import."""
    code = "import threading, cronlock; print(threading.active_count())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
