"""Start and stop a real uWSGI master (and its workers) for the uWSGI tests.

Two builds, where installed: the ``pyuwsgi`` wheel (Python threads run without
``enable-threads``) and Debian's ``uwsgi-core`` with its ``python3`` plugin (they do
not). :func:`command` finds one, skipping the test where it is missing (failing under
``CI=true``, whose ``.ci/run`` installs both). :class:`UwsgiServer` starts a master
through ``tests/procs.py`` and stops it with SIGINT, then whatever is left of its group
with SIGKILL. Used by ``tests/integration/test_uwsgi.py`` (the Flask test app) and
``tests/integration/test_django.py`` (the Django test project).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import NoReturn, Optional

import pytest

from cronlock.testing import free_port, wait_until
from tests import procs

PYUWSGI = Path(sys.executable).with_name("uwsgi")
DEBIAN = Path("/usr/bin/uwsgi-core")
DEBIAN_PLUGIN = Path(
    f"/usr/lib/uwsgi/plugins/python{sys.version_info[0]}{sys.version_info[1]}_plugin.so"
)


def missing(reason: str) -> NoReturn:
    """Skip (locally) or fail (under CI=true, whose .ci/run installs both builds)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"UWSGI TEST NOT RUN: {reason} -- CI must install it", pytrace=False)
    pytest.skip(reason)


def command(build: str) -> list[str]:
    """How to start a uWSGI of ``build`` (``"pyuwsgi"`` or ``"debian"``); skips where missing."""
    if build == "pyuwsgi":
        if not PYUWSGI.exists():
            missing("pyuwsgi is not installed (pip install pyuwsgi)")
        return [str(PYUWSGI)]
    if not (DEBIAN.exists() and DEBIAN_PLUGIN.exists()):
        missing(f"Debian's uwsgi-core with {DEBIAN_PLUGIN.name} is not installed")
    # Debian's plugin embeds Debian's own libpython (3.11.2 on bookworm), not this
    # interpreter, so it needs packages installed for that Python: a venv made with
    # Debian's python3 and `pip install -e ".[flask]"`, named by this variable.
    venv = os.environ.get("CRONLOCK_TEST_UWSGI_DEBIAN_VENV")
    if not venv:
        missing("set CRONLOCK_TEST_UWSGI_DEBIAN_VENV to a venv of Debian's python3")
    site = subprocess.check_output(
        [
            str(Path(venv) / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        text=True,
    ).strip()
    return [
        str(DEBIAN),
        "--plugin",
        DEBIAN_PLUGIN.stem.removesuffix("_plugin"),
        "--pythonpath",
        site,
    ]


class UwsgiServer:
    """One uWSGI master (``--master``, an HTTP socket on a free loopback port) and its workers.

    ``options`` are the rest of the command line (processes, the module to serve...);
    the output of every process goes to ``uwsgi-<port>.log`` in ``log_dir``.
    ``wait_serving`` waits for any HTTP answer at ``ready_path``.
    """

    def __init__(
        self,
        build: str,
        options: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        log_dir: Path,
        ready_path: str = "/",
    ) -> None:
        self.port = free_port()
        self.ready_path = ready_path
        self.log = log_dir / f"uwsgi-{self.port}.log"
        args = [*command(build), "--master", "--http-socket", f"127.0.0.1:{self.port}", *options]
        with self.log.open("wb") as out:
            self.proc = procs.spawn(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.killed = False

    def status(self, path: Optional[str] = None) -> Optional[int]:
        """The HTTP status of ``GET path`` (default ``ready_path``); None without an answer."""
        url = f"http://127.0.0.1:{self.port}{path or self.ready_path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return None

    def wait_serving(self) -> None:
        """Wait until uWSGI answers HTTP; AssertionError (with its output) if it exits first."""
        wait_until(
            lambda: self.proc.poll() is not None or self.status() is not None,
            timeout=60,
            interval=0.2,
        )
        assert self.proc.poll() is None, f"uWSGI exited during startup:\n{self.output()}"

    def output(self) -> str:
        """What the master and its workers wrote."""
        return self.log.read_text(errors="replace")

    def stop(self) -> Optional[int]:
        """SIGINT the master (uWSGI 2.0: stop master and workers); its status, None if it hung.

        SIGINT, not SIGTERM: Debian's uWSGI 2.0 reloads on SIGTERM. The master installs
        its own SIGINT handler, so an inherited "ignore SIGINT" does not matter. Whatever
        is left of the process group is SIGKILLed in any case (``killed`` is then True
        if the master itself hung).
        """
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.killed = True
                return None
        finally:
            procs.end(self.proc, signal.SIGKILL, timeout=1)
