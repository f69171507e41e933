"""Renewal of held locks from the process's one shared renewal thread.

Each hold of a [`RedisLock`][cronlock.lock.RedisLock] with ``renew=True`` gets a
`Renewal`, due every ``ttl / 3``. The holds of one process are kept by
`HOLDS` (a `Holds`), which sits in `cronlock._renewer.get_renewer`'s
heap as *one* entry due at its earliest live renewal. So:

* an acquire costs a dict insert and a heap push on a small heap of live holds, and a
  push to the shared renewer only when it brings the earliest due time forward;
* a release removes the hold at once (a dict delete): released holds never wake the
  renewal thread, however many acquire/release cycles a process runs per second.

A renewal:

* stops quietly once the hold ends (release, re-acquire: a generation number tells);
* marks the lock lost (WARNING, ``on_lost``) when the script says the key is not ours;
* on a Redis error, logs a WARNING and retries while the lease may still be valid, and
  marks the lock lost once [`remaining`][cronlock.lock.RedisLock.remaining] reaches 0;
* with ``max_hold``, asks for shorter leases so the lock ends ``max_hold`` after the
  acquire, then marks it lost if it is still held;
* before its first Redis call, arms a `_LeaseWatch` on the deadline heap, which
  marks the lock lost when the lease runs out even while a renewal hangs on a Redis that
  does not answer. Holds released before their first renewal (most) never pay for it.

Fork: a forked child starts with no holds, so a lock held by the parent is never
renewed by the child (it stays the parent's); the child's own holds are renewed by the
child's renewer. The pools of the holds' clients are held across the fork
(`cronlock._forksafe`), so the renewal thread is never inside one at that moment.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from redis.exceptions import RedisError

from cronlock import _forksafe
from cronlock._renewer import get_deadlines, get_renewer

if TYPE_CHECKING:
    from cronlock.lock import RedisLock

logger = logging.getLogger("cronlock.lock")

#: Ended holds' heap entries tolerated before a compaction (beyond twice the live ones).
_COMPACT_AT = 16


class Renewal:
    """One hold's renewal; stops when the hold ends."""

    __slots__ = ("due", "generation", "interval", "lock", "watched")

    def __init__(self, lock: RedisLock, generation: int, due: float) -> None:
        self.lock = lock
        self.generation = generation
        self.interval = lock.ttl / 3
        self.due = due
        self.watched = False

    def _current(self) -> Optional[str]:
        lock = self.lock
        with lock._state:
            live = lock._generation == self.generation and lock._held and not lock._releasing
            return lock.token if live and not lock._lost else None

    def _next_ttl_ms(self, now: float) -> int:
        """The lease to ask for: the ttl, cut short so it ends at max_hold."""
        lock = self.lock
        if lock._max_hold is None:
            return lock._ttl_ms
        return min(lock._ttl_ms, int((lock._acquired_at + lock._max_hold - now) * 1000))

    def renew_due(self) -> Optional[float]:
        """Renew now; the monotonic time of the next renewal, or None when done."""
        lock = self.lock
        token = self._current()
        if token is None:
            return None
        now = time.monotonic()
        ttl_ms = self._next_ttl_ms(now)
        if ttl_ms <= 0:
            lock._mark_lost(f"max_hold={lock._max_hold:g} s reached; renewal stopped")
            return None
        if not self.watched:
            self.watched = True
            get_deadlines().schedule(_LeaseWatch(self), lock._valid_until)
        try:
            ok = lock._extend(token, ttl_ms)
        except RedisError as error:
            return self._failed(error)
        if not ok:
            if self._current() is not None:  # not released meanwhile: really lost
                lock._mark_lost("renewal found another owner or no key")
            return None
        if ttl_ms < lock._ttl_ms:  # last renewal before max_hold: report when it ends
            return now + ttl_ms / 1000
        return now + self.interval

    def _failed(self, error: RedisError) -> Optional[float]:
        """Redis could not be asked: retry while the lease may still be valid."""
        lock = self.lock
        left = lock.remaining()
        if left <= 0:
            lock._mark_lost(f"renewal failed ({error!r}) until the lease ran out")
            return None
        logger.warning(
            "cronlock: renewing lock %r failed (%r); retrying, lease valid %.3f s more",
            lock.key,
            error,
            left,
        )
        return time.monotonic() + max(0.05, min(self.interval, left))

    def __repr__(self) -> str:
        return f"Renewal({self.lock!r})"


class _LeaseWatch:
    """A renewing hold's lease deadline on the deadline heap (never waits for Redis)."""

    __slots__ = ("renewal",)

    def __init__(self, renewal: Renewal) -> None:
        self.renewal = renewal

    def renew_due(self) -> Optional[float]:
        if self.renewal._current() is None:  # released, re-acquired or already lost
            return None
        lock = self.renewal.lock
        left = lock.remaining()  # moved on by every renewal that reached Redis in time
        if left > 0:
            return time.monotonic() + left
        lock._mark_lost("its lease ran out before a renewal reached Redis")
        return None


class _Ticket:
    """The holds' one entry in the shared renewer; a superseded ticket stops itself."""

    __slots__ = ("due", "holds")

    def __init__(self, holds: Holds, due: float) -> None:
        self.holds = holds
        self.due = due

    def renew_due(self) -> Optional[float]:
        return self.holds._serve(self)

    def __repr__(self) -> str:
        return "Renewal(held locks)"


class Holds:
    """The live renewing holds of this process, served from the shared renewer."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._live: dict[Renewal, int] = {}
        self._heap: list[tuple[float, int, Renewal]] = []
        self._seq = itertools.count()
        self._ticket: Optional[_Ticket] = None
        self._pid = os.getpid()

    def add(self, renewal: Renewal) -> None:
        """Renew ``renewal`` at its due time (and again as it asks) until discarded."""
        with self._mutex:
            if self._pid != os.getpid():
                self._reset()
            self._push(renewal)
            ticket = self._ticket
            if ticket is not None and ticket.due <= renewal.due:
                return
            ticket = self._ticket = _Ticket(self, renewal.due)
        get_renewer().schedule(ticket, ticket.due)

    def discard(self, renewal: Renewal) -> None:
        """Stop renewing ``renewal`` (its hold ended); never sends anything to Redis."""
        with self._mutex:
            if self._live.pop(renewal, None) is None:
                return
            if len(self._heap) > _COMPACT_AT + 2 * len(self._live):
                self._compact()

    def __len__(self) -> int:
        with self._mutex:
            return len(self._live)

    def clients(self) -> list[Any]:
        """The clients the renewal thread uses for the live holds (for fork safety)."""
        with self._mutex:
            return [renewal.lock._client for renewal in self._live]

    def _push(self, renewal: Renewal) -> None:
        seq = next(self._seq)
        self._live[renewal] = seq
        heapq.heappush(self._heap, (renewal.due, seq, renewal))

    def _compact(self) -> None:
        """Drop heap entries of ended holds (amortised O(1) per discard)."""
        self._heap = [entry for entry in self._heap if self._live.get(entry[2]) == entry[1]]
        heapq.heapify(self._heap)

    def _serve(self, ticket: _Ticket) -> Optional[float]:
        """Renew what is due; the next due time, or None when this ticket is done."""
        with self._mutex:
            if ticket is not self._ticket:
                return None
            now = time.monotonic()
            due: list[Renewal] = []
            heap = self._heap
            while heap and (heap[0][0] <= now or self._live.get(heap[0][2]) != heap[0][1]):
                _, seq, renewal = heapq.heappop(heap)
                if self._live.get(renewal) == seq:
                    del self._live[renewal]
                    due.append(renewal)
        for renewal in due:
            nxt = renewal.renew_due()  # Redis I/O: outside the mutex
            if nxt is not None:
                renewal.due = nxt
                with self._mutex:
                    if self._pid == os.getpid() and renewal.lock._renewal is renewal:
                        self._push(renewal)
        with self._mutex:
            if ticket is not self._ticket:
                return None
            if not self._heap:
                self._ticket = None
                return None
            ticket.due = self._heap[0][0]
            return ticket.due

    def _reset(self) -> None:
        """In a forked child: forget the parent's holds (they stay the parent's)."""
        self._live = {}
        self._heap = []
        self._ticket = None
        self._pid = os.getpid()


#: This process's renewing lock holds.
HOLDS = Holds()


def _after_fork_in_child() -> None:
    HOLDS._mutex = threading.Lock()  # the parent's may have been held at the fork
    HOLDS._reset()


_forksafe.clients_from(HOLDS.clients)  # their pools are held across fork()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
