"""Renewal threads: one per server (connection pool), so a dead server delays no other.

Each held lease registers a `Renewable` with a due time; a `Renewer` thread sleeps on a
heap of due times, calls ``renew_due()`` on whatever is due and re-queues it at the time
that call returns. Starting a thread per lock costs a thread start per acquire (what
makes python-redis-lock and pottery 2-4x slower than a bare ``SET NX``); a heap costs
one push.

Renewals on one heap run one after another, so a call that hangs delays the others by
up to the client's socket timeout (forever without one). Hence `get_renewer` gives
each *server* its own heap and thread (`server_of` says which: a redis-py client's
connection pool, a cluster client, a SQL store): a renewal stuck on a dead server holds
up only the renewals of that server. The registry references servers weakly, and a
thread that has had nothing queued for `IDLE_EXIT_S` exits (the next ``schedule()``
starts another), so a process that made many clients keeps no thread per client.

Deadlines that need no store call (a lease running out, a job's timeout) sit on one
more heap with its own thread, `get_deadlines` (one per process), which a stuck
renewal cannot hold up.

Fork: the threads do not exist in a forked child. Every heap is emptied in the child,
so a lease held by the parent is never renewed (nor released) by the child: it stays
the parent's.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import weakref
from typing import Any, Optional, Protocol

from cronlock import _forksafe
from cronlock.clock import monotonic

logger = logging.getLogger(__name__)

#: Seconds a renewal thread waits with nothing queued before it exits (read when a
#: heap is made; the next schedule() on that heap starts a new thread).
IDLE_EXIT_S = 10.0


class Renewable(Protocol):
    """Something with a lease to keep alive."""

    def renew_due(self) -> Optional[float]:
        """Renew now; return the `cronlock.clock.monotonic()` of the next renewal, or None to stop.

        Must not raise: report failures its own way (``lost`` event, ``on_error``).
        """


class Deadline(Protocol):
    """Something to do at a monotonic time, without calling Redis (a lease running out,
    a job's timeout): it renews nothing."""

    def deadline_passed(self) -> Optional[float]:
        """The deadline has come: act, and return a later ``time.monotonic()`` deadline
        to be called again then, or None to stop. Must not raise nor block."""


class Renewer:
    """A heap of (due time, item) served by one daemon thread, started on demand.

    Calls ``renew_due()`` of each due item; `Deadlines` calls ``deadline_passed()``.
    The thread exits after ``idle_exit_s`` with an empty heap; ``schedule()`` restarts it.
    """

    def __init__(self, name: str = "cronlock-renewer", idle_exit_s: Optional[float] = None) -> None:
        self._name = name
        self._idle_exit_s = IDLE_EXIT_S if idle_exit_s is None else idle_exit_s
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._thread: Optional[threading.Thread] = None
        self._pid = os.getpid()

    @property
    def name(self) -> str:
        """The thread's name (``cronlock-renewer`` and the server, for thread dumps)."""
        return self._name

    def schedule(self, item: Any, due: float) -> None:
        """Call ``item.renew_due()`` at monotonic time ``due`` (and again as it asks)."""
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._seq), item))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0][2] is item:
                self._cond.notify()

    def pending(self) -> int:
        """How many renewals are queued (released items linger until their due time)."""
        with self._cond:
            return len(self._heap)

    def running(self) -> bool:
        """Whether the thread is up (it exits once idle, and starts again on demand)."""
        with self._cond:
            return self._thread is not None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > monotonic():
                    if self._heap:
                        self._cond.wait(self._heap[0][0] - monotonic())
                    elif not self._cond.wait(self._idle_exit_s) and not self._heap:
                        self._thread = None  # under the lock: schedule() starts a new one
                        return
                _, _, item = heapq.heappop(self._heap)
            try:
                nxt = self._serve(item)
            except Exception:  # a renewable must not raise; never let it kill the thread
                logger.exception("cronlock: renewal of %r raised", item)
                continue
            if nxt is not None:
                with self._cond:
                    heapq.heappush(self._heap, (nxt, next(self._seq), item))

    def _serve(self, item: Renewable) -> Optional[float]:
        return item.renew_due()

    def after_fork_in_child(self) -> None:
        """Start empty and threadless, with a new lock (the parent's may have been held)."""
        self._cond = threading.Condition(threading.Lock())
        self._heap = []
        self._thread = None
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r} pending={len(self._heap)}>"


class Deadlines(Renewer):
    """A heap of deadlines (see `Deadline`), served by a thread that never calls Redis."""

    def schedule(self, item: Deadline, due: float) -> None:
        """Call ``item.deadline_passed()`` at monotonic time ``due`` (and as it asks)."""
        super().schedule(item, due)

    def _serve(self, item: Deadline) -> Optional[float]:  # type: ignore[override]
        return item.deadline_passed()


def server_of(obj: object) -> object:
    """The identity of the server ``obj`` talks to, which picks its renewal heap.

    A redis-py client's connection pool (clients sharing a pool share the heap); a
    store with a redis-py ``client`` (`RedisStore`): that client's; anything else (a
    ``RedisCluster``, a SQL store) is its own identity. None stays None (the shared heap).
    """
    if obj is None:
        return None
    pool = getattr(obj, "connection_pool", None)
    if pool is not None:
        return pool
    client = getattr(obj, "__dict__", {}).get("client")  # an attribute, never a method
    if client is not None and client is not obj:
        return server_of(client)
    return obj


def _label(server: object) -> str:
    """A short name for a server in its thread's name."""
    kwargs = getattr(server, "connection_kwargs", None)
    if isinstance(kwargs, dict):
        where = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
        return f"{where}/{kwargs.get('db', 0)}"
    return type(server).__name__


_default: dict[str, Renewer] = {}
_by_server: weakref.WeakKeyDictionary[Any, Renewer] = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def _shared(name: str, kind: type[Renewer] = Renewer) -> Renewer:
    with _registry_lock:
        heap = _default.get(name)
        if heap is None:
            heap = _default[name] = kind(name)
        return heap


def get_renewer(server: object = None) -> Renewer:
    """The renewal heap of ``server`` (see `server_of`): one per server identity, made
    on first use; None (the default): the process's shared heap."""
    identity = server_of(server)
    if identity is None:
        return _shared("cronlock-renewer")
    with _registry_lock:
        heap = _by_server.get(identity)
        if heap is None:
            heap = _by_server[identity] = Renewer(f"cronlock-renewer {_label(identity)}")
        return heap


def get_deadlines() -> Renewer:
    """This process's deadline heap (`Deadlines`): items that must never wait for Redis."""
    return _shared("cronlock-deadlines", Deadlines)


def _after_fork_in_child() -> None:
    global _registry_lock  # noqa: PLW0603
    _registry_lock = threading.Lock()  # the parent's may have been held at the fork
    for heap in [*_default.values(), *_by_server.values()]:
        heap.after_fork_in_child()


_forksafe.on_fork(_forksafe.Phase.STATE, after_in_child=_after_fork_in_child)
