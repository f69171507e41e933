"""A private PostgreSQL server for the tests, as `cronlock.testing.RedisServer` is for Redis.

The Debian binaries (``initdb``, ``postgres``) under ``/usr/lib/postgresql/<version>/bin``
(the newest version), or ``$CRONLOCK_TEST_PG_BIN``. `PostgresServer.start` runs
``initdb`` into a temporary directory once (trust authentication, user ``postgres``,
no fsync: a test server may lose its data in a power cut, never in a process crash;
``synchronous_commit`` stays on, since without it a crash forgets the latest commits),
then the postmaster itself on a free loopback port with its socket in that directory.
The postmaster is started directly rather than by ``pg_ctl``, so the test holds its
process: `kill` and `pause` reach it and every process it forked (found by parent pid:
each calls setsid(), so a signal to the process group would not reach them), as a
crashed or frozen host would.

PostgreSQL refuses to run as root: a test run as root (a container) runs the server as
the ``postgres`` system user (``$CRONLOCK_TEST_PG_USER``), which owns the directory.

The data survive `kill` and `restart` (PostgreSQL recovers from its WAL), unlike a
private Redis that keeps nothing on disk. `stop` ends the server and removes the
directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import psycopg

from cronlock.testing import free_port

DATABASE = "cronlock_test"
START_ATTEMPTS = 5


def find_bin_dir() -> Path:
    """The directory of ``initdb`` and ``postgres``, or ``FileNotFoundError`` saying why."""
    env = os.environ.get("CRONLOCK_TEST_PG_BIN")
    candidates = [Path(env)] if env else []
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)] or [0],
        reverse=True,
    )
    candidates += versions
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "postgres").exists():
            return directory
    raise FileNotFoundError(
        "no PostgreSQL server binaries (initdb, postgres) under /usr/lib/postgresql/*/bin "
        "(apt-get install postgresql) or in $CRONLOCK_TEST_PG_BIN"
    )


def server_user() -> Optional[str]:
    """The user to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("CRONLOCK_TEST_PG_USER", "postgres")
    try:
        pwd.getpwnam(name)
    except KeyError:
        raise FileNotFoundError(
            f"running as root, and PostgreSQL refuses root: no user {name!r} to run it as "
            "(set CRONLOCK_TEST_PG_USER)"
        ) from None
    return name


class PortInUse(RuntimeError):
    """The postmaster could not bind its port."""


class PostgresServer:
    """One private PostgreSQL cluster; start, kill, pause and restart it on one port."""

    def __init__(self, bin_dir: Optional[Path] = None) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.user = server_user()
        self.dir = Path(tempfile.mkdtemp(prefix="cronlock-pg-"))
        if self.user is not None:
            shutil.chown(self.dir, self.user)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.host = "127.0.0.1"
        self.port = free_port()
        self._port_fixed = False
        self.process: Optional[subprocess.Popen[bytes]] = None

    @property
    def dsn(self) -> str:
        """A URL of the test database (user ``postgres``, no password)."""
        return f"postgresql://postgres@{self.host}:{self.port}/{DATABASE}"

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        """A new connection to the test database (``autocommit`` etc. as keywords)."""
        kwargs.setdefault("connect_timeout", 5)
        return psycopg.connect(self.dsn, **kwargs)

    def start(self, timeout: float = 30.0) -> PostgresServer:
        """initdb (once), start the postmaster, create the test database (once)."""
        if not self.data.exists():
            self._initdb()
        attempts = 1 if self._port_fixed else START_ATTEMPTS
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(timeout)
            except PortInUse:
                if attempt == attempts:
                    raise
                self.port = free_port()
            else:
                self._port_fixed = True
                break
        with psycopg.connect(self._dsn("postgres"), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE])
            if found.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
        return self

    def _dsn(self, database: str) -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}?connect_timeout=2"

    def _initdb(self) -> None:
        subprocess.run(
            [
                str(self.bin_dir / "initdb"),
                "-D", str(self.data),
                "-U", "postgres",
                "-A", "trust",
                "-E", "UTF8",
                "--no-sync",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
            user=self.user,
        )  # fmt: skip

    def _start_once(self, timeout: float) -> None:
        args = [
            str(self.bin_dir / "postgres"),
            "-D", str(self.data),
            "-p", str(self.port),
            "-c", f"listen_addresses={self.host}",
            "-k", str(self.dir),
            "-c", "fsync=off",
            "-c", "full_page_writes=off",
            "-c", "shared_buffers=16MB",
            "-c", "max_connections=200",
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            start = log.tell()
            self.process = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=self.user,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                self._exited(start)
            with (
                contextlib.suppress(psycopg.OperationalError),
                psycopg.connect(self._dsn("postgres"), autocommit=True) as conn,
            ):
                row = conn.execute("SHOW data_directory").fetchone()
                # whoever took the port may answer too: only our cluster counts
                if row is not None and Path(row[0]).resolve() == self.data.resolve():
                    return
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"PostgreSQL did not answer on port {self.port}")
            time.sleep(0.05)

    def _exited(self, log_start: int) -> None:
        assert self.process is not None
        with open(self.log, "rb") as log:
            log.seek(log_start)
            output = log.read().decode("utf-8", "replace")
        message = (
            f"postgres exited with {self.process.returncode} on port {self.port}: "
            + " | ".join(output.strip().splitlines()[-3:])
        )
        if "could not bind" in output.lower() or "address already in use" in output.lower():
            raise PortInUse(message)
        raise RuntimeError(message)

    def _children(self) -> list[int]:
        """The server processes the postmaster forked (each calls setsid(), so they are
        not in its process group: a signal to the group would miss them)."""
        assert self.process is not None
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = stat.read_text().rpartition(")")[2].split()
                if int(fields[1]) == self.process.pid:
                    found.append(int(stat.parent.name))
        return found

    def _signal_all(self, signum: int) -> None:
        """``signum`` to the postmaster and every server process, the postmaster held
        stopped meanwhile so that it forks no new one and its children stay its own."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGSTOP)
            for pid in self._children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            os.kill(self.process.pid, signum)
            if signum not in (signal.SIGSTOP, signal.SIGKILL):
                os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL every server process, as a crash of its host would (data stay on disk)."""
        if self.process is not None and self.process.poll() is None:
            self._signal_all(signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP every server process: connections stay open, nothing answers."""
        self._signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_all(signal.SIGCONT)

    def restart(self) -> None:
        """Kill and start again on the same port (PostgreSQL recovers its data)."""
        self.kill()
        self.start()

    def stop(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected) and remove its directory."""
        if self.process is not None and self.process.poll() is None:
            self.resume()
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
