"""Fresh virtual environments and clean copies of the checkout, for the packaging tests.

A packaging test must see what a new user sees: no editable install of this checkout,
no pytest state leaking through the environment, no ``REDIS_URL`` pointing elsewhere.
Everything lives under the test's temporary directory; nothing is cached between runs
(pip's own download cache aside).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Union

from tests import procs

#: The checkout these tests belong to.
CHECKOUT = Path(__file__).resolve().parents[2]

# Local state that is not part of the project: never copied into a "fresh" checkout.
_NOT_PROJECT = (
    ".git",
    ".venv",
    ".ci-venv*",
    "venv",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    ".benchmarks",
    "build",
    "dist",
    "*.egg-info",
    "site",
    "test-artifacts",
)


def copy_checkout(dest: Path) -> Path:
    """Copy the working tree (without VCS data, venvs, caches or build output) to ``dest``."""
    shutil.copytree(CHECKOUT, dest, ignore=shutil.ignore_patterns(*_NOT_PROJECT), symlinks=True)
    return dest


def make_venv(path: Path) -> Path:
    """Create a venv at ``path`` with this interpreter (its base, not its site-packages)."""
    procs.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return path


def venv_env(venv: Path) -> dict[str, str]:
    """The environment a user of ``venv`` has: its ``bin`` first, no test-run leftovers."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "PYTHON", "COV_"))
        and key not in ("VIRTUAL_ENV", "REDIS_URL", "CRONLOCK_REDIS_URL")
    }
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(
    args: Union[list[str], str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    shell: bool = False,
    check: bool = True,
    input_text: Optional[str] = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing output; on failure the assertion shows what it printed."""
    result = procs.run(
        ["bash", "-c", args] if shell else args,
        cwd=cwd,
        env=env,
        timeout=timeout,
        text=True,
        input=input_text,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    if check:
        output = "\n".join(
            line for line in result.stdout.splitlines() if not line.startswith("WARNING: Location")
        )
        assert result.returncode == 0, f"{args!r} exited {result.returncode}:\n{output[-4000:]}"
    return result
