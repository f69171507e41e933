"""A small TCP proxy for fault tests: put it between a client and Redis, then break it.

The proxy listens on a free loopback port and forwards every connection to the real
server. While it runs, a test can:

* [`TcpProxy.set_delay`][cronlock.testing.TcpProxy.set_delay] - hold every forwarded chunk for a
  while (a slow network);
* [`TcpProxy.partition`][cronlock.testing.TcpProxy.partition] /
  [`TcpProxy.heal`][cronlock.testing.TcpProxy.heal] - drop everything in both directions (a
  network cut: the client sees timeouts, the server sees silence), then restore service
  (connections cut during the partition are closed at the heal, as a real network's TCP
  timeouts would eventually do);
* [`TcpProxy.cut`][cronlock.testing.TcpProxy.cut] - close every current connection at once (a
  reset);
* [`TcpProxy.drop_reply_to`][cronlock.testing.TcpProxy.drop_reply_to] - let a command matching some
  bytes reach the server, discard the server's reply and close that connection: "the command was
  applied but its reply was lost".

Guarantee and limits: a test tool, not a production proxy. Each connection costs two
threads; chunks are forwarded as read (no RESP parsing), which on loopback means a
reply arrives in one chunk. Threads are started only by
[`TcpProxy.start`][cronlock.testing.TcpProxy.start], never at import.

Example:
    ```python
    proxy = TcpProxy(("127.0.0.1", server.port)).start()
    client = redis.Redis(port=proxy.port, socket_timeout=0.5)
    proxy.partition()   # client calls now time out
    proxy.heal()
    proxy.stop()
    ```
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Optional

logger = logging.getLogger(__name__)

_CHUNK = 65536


class _Pair:
    """One proxied connection: the client's socket and ours to the server."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.drop_next_reply = False
        self.closed = False
        self.blackholed = False
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream``, with faults on demand.

    Args:
        upstream: ``(host, port)`` of the real server.
        port: the port to listen on (default: a free one).

    Attributes:
        replies_dropped: how many replies [`drop_reply_to`][cronlock.testing.TcpProxy.drop_reply_to]
            has discarded.
        drop_times: when each was discarded (``time.time()``).
    """

    def __init__(self, upstream: tuple[str, int], port: int = 0) -> None:
        self.upstream = upstream
        self.host = "127.0.0.1"
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((self.host, port))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: set[_Pair] = set()
        self._delay = 0.0
        self._partitioned = False
        self._drop_pattern: Optional[bytes] = None
        self._drop_remaining = 0
        self.replies_dropped = 0
        self.drop_times: list[float] = []
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        """A ``redis://`` URL that goes through the proxy (database 0)."""
        return f"redis://{self.host}:{self.port}/0"

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> TcpProxy:
        """Start accepting connections (one daemon thread, plus two per connection)."""
        self._listener.listen(64)
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and close every connection."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults -------------------------------------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """Hold each forwarded chunk ``seconds`` before passing it on (0: no delay)."""
        self._delay = max(0.0, float(seconds))

    def partition(self) -> None:
        """Drop every byte in both directions, on current and new connections."""
        with self._lock:
            self._partitioned = True
            for pair in self._pairs:
                pair.blackholed = True

    def heal(self) -> None:
        """End a partition; connections that lived through it are closed (their streams
        lost bytes, so they could never be used again)."""
        with self._lock:
            self._partitioned = False
            stale = [p for p in self._pairs if p.blackholed]
        for pair in stale:
            pair.close()

    @property
    def partitioned(self) -> bool:
        return self._partitioned

    def cut(self) -> int:
        """Close every current connection now; returns how many were closed."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.close()
        return len(pairs)

    def drop_reply_to(self, pattern: bytes, count: int = 1) -> None:
        """For the next ``count`` client chunks containing ``pattern``: forward the command,
        discard the server's reply, close that connection."""
        with self._lock:
            self._drop_pattern = pattern
            self._drop_remaining = count

    def connections(self) -> int:
        """How many proxied connections are open."""
        with self._lock:
            return len(self._pairs)

    # -- forwarding ---------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                with contextlib.suppress(OSError):
                    client.close()  # the server is down: the client sees a reset
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, upstream)
            with self._lock:
                pair.blackholed = self._partitioned
                self._pairs.add(pair)
            for upstream_bound in (True, False):
                threading.Thread(
                    target=self._pump, args=(pair, upstream_bound), daemon=True
                ).start()

    def _match_drop(self, data: bytes) -> bool:
        with self._lock:
            if self._drop_pattern is None or self._drop_remaining <= 0:
                return False
            if self._drop_pattern not in data:
                return False
            self._drop_remaining -= 1
            return True

    def _pump(self, pair: _Pair, upstream_bound: bool) -> None:
        src, dst = (pair.client, pair.upstream) if upstream_bound else (pair.upstream, pair.client)
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                if pair.blackholed:
                    continue
                if self._delay:
                    time.sleep(self._delay)
                if upstream_bound:
                    if self._match_drop(data):
                        pair.drop_next_reply = True
                elif pair.drop_next_reply:
                    self.replies_dropped += 1
                    self.drop_times.append(time.time())
                    logger.debug("proxy: dropped a %d-byte reply, closing", len(data))
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            pair.close()
            with self._lock:
                self._pairs.discard(pair)
