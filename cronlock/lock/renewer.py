"""One renewal thread per process, shared by every lock and every running job.

Each held lease registers a `Renewable` with a due time; the thread sleeps on a
heap of due times, calls ``renew_due()`` on whatever is due and re-queues it at the time
that call returns. Starting a thread per lock costs a thread start per acquire (what
makes python-redis-lock and pottery 2-4x slower than a bare ``SET NX``); a heap costs
one push.

Limits: renewals run one after another, so a Redis call that hangs delays the others
by up to the client's socket timeout (forever without one). Deadlines that need no
Redis call (a lease running out, a job's timeout) therefore sit on a second heap with
its own thread, `get_deadlines`, which a stuck renewal cannot hold up.

Fork: the threads do not exist in a forked child. The child gets fresh, empty
heaps on first use, so a lease held by the parent is never renewed (nor released)
by the child: it stays the parent's.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
from typing import Any, Optional, Protocol

from cronlock import _forksafe
from cronlock.clock import monotonic

logger = logging.getLogger(__name__)


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
    """A heap of (due time, item) served by one daemon thread, started on first use.

    Calls ``renew_due()`` of each due item; `Deadlines` calls ``deadline_passed()``.
    """

    def __init__(self, name: str = "cronlock-renewer") -> None:
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._thread: Optional[threading.Thread] = None
        self._pid = os.getpid()

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

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > monotonic():
                    timeout = self._heap[0][0] - monotonic() if self._heap else None
                    self._cond.wait(timeout)
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


class Deadlines(Renewer):
    """A heap of deadlines (see `Deadline`), served by a thread that never calls Redis."""

    def schedule(self, item: Deadline, due: float) -> None:
        """Call ``item.deadline_passed()`` at monotonic time ``due`` (and as it asks)."""
        super().schedule(item, due)

    def _serve(self, item: Deadline) -> Optional[float]:  # type: ignore[override]
        return item.deadline_passed()


_heaps: dict[str, Renewer] = {}
_heaps_lock = threading.Lock()


def _heap(name: str, kind: type[Renewer] = Renewer) -> Renewer:
    with _heaps_lock:
        heap = _heaps.get(name)
        if heap is None or heap._pid != os.getpid():
            heap = _heaps[name] = kind(name)
        return heap


def get_renewer() -> Renewer:
    """This process's renewer: items that call Redis (a new one after ``fork()``)."""
    return _heap("cronlock-renewer")


def get_deadlines() -> Renewer:
    """This process's deadline heap (`Deadlines`): items that must never wait for Redis."""
    return _heap("cronlock-deadlines", Deadlines)


def _after_fork_in_child() -> None:
    global _heaps_lock  # noqa: PLW0603
    _heaps.clear()
    _heaps_lock = threading.Lock()  # the parent's may have been held at the fork


_forksafe.on_fork(_forksafe.Phase.STATE, after_in_child=_after_fork_in_child)
