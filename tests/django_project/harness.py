"""Start the test project's processes (``manage.py``, gunicorn, uWSGI) for the Django tests.

Every process is started in a session of its own, and `Project.close` ends each whole
process group that is still alive, so a test that fails half-way leaves nothing behind.
(A uWSGI master goes through ``tests/uwsgi_server.py`` and ``tests/procs.py``, whose
``stop`` ends its group.)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

from cronlock.testing import free_port, wait_until
from tests.uwsgi_server import UwsgiServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONF = HERE / "gunicorn.conf.py"


class Project:
    """The test project against one Redis, one SQLite file and one record directory."""

    def __init__(
        self,
        redis_url: str,
        tmp: Path,
        *,
        prefix: str,
        jobs: str = "",
        cronlock: Optional[dict[str, Any]] = None,
    ) -> None:
        self.records = tmp / "records"
        self.records.mkdir(exist_ok=True)
        self.prefix = prefix
        self.env = {
            **os.environ,
            "DT_REDIS_URL": redis_url,
            "DT_PREFIX": prefix,
            "DT_DB": str(tmp / "db.sqlite3"),
            "DT_RECORD_DIR": str(self.records),
            "DT_JOBS": jobs,
            "DT_CRONLOCK": json.dumps(cronlock or {}),
            "DJANGO_SETTINGS_MODULE": "dtproject.settings",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(
        self, args: list[str], *, log: Optional[Path] = None, **env: str
    ) -> subprocess.Popen[str]:
        """Start ``args`` in the project directory, in a new session (output to ``log``)."""
        out: Any = subprocess.PIPE if log is None else log.open("a")
        proc = subprocess.Popen(
            args,
            cwd=HERE,
            env={**self.env, **env},
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        if log is not None:
            out.close()  # the child has its own copy
        self.procs.append(proc)
        return proc

    def manage(
        self, *args: str, timeout: float = 60, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run ``manage.py args`` to its end; its output and exit status."""
        proc = self.spawn([sys.executable, "manage.py", *args], **env)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            _kill_group(proc)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def gunicorn(self, *extra: str, workers: int = 3) -> Gunicorn:
        """A gunicorn master serving ``dtproject.wsgi`` with ``workers`` workers."""
        return Gunicorn(self, list(extra), workers)

    def uwsgi(self, *extra: str, processes: int = 3) -> UwsgiServer:
        """A pyuwsgi master serving ``dtproject.uwsgi_app`` with ``processes`` workers.

        Skips the test where pyuwsgi is not installed (fails under ``CI=true``).
        """
        options = ["--processes", str(processes), "--need-app", "--pythonpath", str(HERE)]
        options += ["--pythonpath", str(ROOT), "--module", "dtproject.uwsgi_app:application"]
        options += ["--worker-reload-mercy", "10", "--disable-logging", *extra]
        return UwsgiServer(
            "pyuwsgi",
            options,
            cwd=HERE,
            env=self.env,
            log_dir=self.records.parent,
            ready_path="/cronlock/health",
        )

    def close(self) -> None:
        """End every process group still alive."""
        for proc in self.procs:
            _kill_group(proc)


class Gunicorn:
    """One gunicorn master (and its workers) with the cronlock hooks of ``gunicorn.conf.py``."""

    def __init__(self, project: Project, extra: list[str], workers: int) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "gunicorn", "-c", str(CONF), "-w", str(workers)]
        args += ["-b", f"127.0.0.1:{self.port}", *extra, "dtproject.wsgi:application"]
        self.log = project.records.parent / f"gunicorn-{self.port}.log"
        self.proc = project.spawn(args, log=self.log)

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.base + "/cronlock/health", timeout=5):
                return True
        except urllib.error.HTTPError:
            return True  # 403 for a visitor: Django answered
        except OSError:
            return False

    def wait_serving(self) -> None:
        wait_until(lambda: self.proc.poll() is not None or self.answers(), timeout=60, interval=0.2)
        if self.proc.poll() is not None:
            raise AssertionError(f"gunicorn exited during startup: {self.output()[-2000:]}")

    def output(self) -> str:
        """What the master and its workers wrote to stdout and stderr."""
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> int:
        """SIGTERM the master (a graceful stop), wait for it; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=40)
        finally:
            _kill_group(self.proc)
        return self.proc.returncode


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process group ``proc`` leads, if any of it is left; reap ``proc``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(10)
