"""Renewal of held locks from the process's one shared renewal thread.

Each hold of a [`LeaseLock`][cronlock.lock.LeaseLock] (on Redis or another store) with
``renew=True`` gets a `Renewal`, due every ``ttl / 3``. The holds of one process are kept by
`HOLDS` (a `Holds`), which sits in `cronlock.lock.renewer.get_renewer`'s
heap as *one* entry due at its earliest live renewal. So:

* an acquire costs a dict insert and a heap push on a small heap of live holds, and a
  push to the shared renewer only when it brings the earliest due time forward;
* a release removes the hold at once (a dict delete): released holds never wake the
  renewal thread, however many acquire/release cycles a process runs per second.

A renewal:

* stops quietly once the hold ends (release, re-acquire: a generation number tells);
* stops with a WARNING naming the key once the handle was garbage-collected without a
  release: holds reference their handle weakly (`RenewableHold.dropped`), so a dropped
  handle's lease lapses on the store within its ttl instead of being renewed for as long as
  the process lives (the runner's job leases are held by their running ``Run``, which
  the shared renewer references strongly, and are not affected);
* marks the lock lost (WARNING, ``on_lost``) when the script says the key is not ours;
* on a store error (one of the hold's ``errors``), logs a WARNING and retries while the
  lease may still be valid, and marks the lock lost once
  [`remaining`][cronlock.lock.LeaseLock.remaining] reaches 0;
* with ``max_hold``, asks for shorter leases so the lock ends ``max_hold`` after the
  acquire, then marks it lost if it is still held;
* before its first store call, arms a `_LeaseWatch` on the deadline heap, which
  marks the lock lost when the lease runs out even while a renewal hangs on a store that
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
from typing import Any, Optional, Protocol

from cronlock import _forksafe
from cronlock.clock import monotonic
from cronlock.lock.renewer import get_deadlines, get_renewer

logger = logging.getLogger("cronlock.lock")

#: Ended holds' heap entries tolerated before a compaction (beyond twice the live ones).
_COMPACT_AT = 16


class RenewableHold(Protocol):
    """What a renewal needs from one hold of a lock (one acquire, until it ends).

    The lock hands each renewing hold to `Renewal` as this interface, so the renewal
    never reads the lock's own state. Times are `cronlock.clock.monotonic()` seconds.
    """

    @property
    def key(self) -> str:
        """The lock's name, for logs."""

    @property
    def client(self) -> Any:
        """The redis-py client the renewal calls (its pools are held across fork), or
        None for a store that keeps its connections per process."""

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """What an extend raises when the store cannot be asked (retried, not fatal)."""

    @property
    def ttl_ms(self) -> int:
        """The lease each renewal asks for."""

    @property
    def max_hold(self) -> Optional[float]:
        """Seconds after ``acquired_at`` at which renewing stops; None: no bound."""

    @property
    def acquired_at(self) -> float:
        """When the acquire that started this hold was sent."""

    @property
    def valid_until(self) -> float:
        """Until when the lease is certainly valid (moved on by every extend)."""

    def live_token(self) -> Optional[str]:
        """The hold's token while it is held, not being released and not lost; else None."""

    def dropped(self) -> bool:
        """True once the handle was garbage-collected while held (never released nor lost).

        The hold references its handle weakly, so a dropped handle is not kept alive
        (nor its key renewed forever) by the renewal thread.
        """

    def remaining(self) -> float:
        """Seconds the lease is certainly still valid; 0.0 once ended."""

    def extend(self, token: str, ttl_ms: int) -> bool:
        """One extend round trip; False when the key is no longer ``token``'s."""

    def mark_lost(self, reason: str) -> None:
        """Report the hold lost (WARNING, ``on_lost``, ``lost``), once."""


class Renewal:
    """One hold's renewal; stops when the hold ends."""

    __slots__ = ("due", "hold", "interval", "watched")

    def __init__(self, hold: RenewableHold, due: float) -> None:
        self.hold = hold
        self.interval = hold.ttl_ms / 1000 / 3
        self.due = due
        self.watched = False

    def _next_ttl_ms(self, now: float) -> int:
        """The lease to ask for: the ttl, cut short so it ends at max_hold."""
        hold = self.hold
        if hold.max_hold is None:
            return hold.ttl_ms
        return min(hold.ttl_ms, int((hold.acquired_at + hold.max_hold - now) * 1000))

    def renew_due(self) -> Optional[float]:
        """Renew now; the monotonic time of the next renewal, or None when done."""
        hold = self.hold
        token = hold.live_token()
        if token is None:
            self._ended()
            return None
        now = monotonic()
        ttl_ms = self._next_ttl_ms(now)
        if ttl_ms <= 0:
            hold.mark_lost(f"max_hold={hold.max_hold:g} s reached; renewal stopped")
            return None
        if not self.watched:
            self.watched = True
            get_deadlines().schedule(_LeaseWatch(hold), hold.valid_until)
        try:
            ok = hold.extend(token, ttl_ms)
        except hold.errors as error:
            return self._failed(error)
        if not ok:
            if hold.live_token() is not None:  # not released meanwhile: really lost
                hold.mark_lost("renewal found another owner or no key")
            else:
                self._ended()
            return None
        if ttl_ms < hold.ttl_ms:  # last renewal before max_hold: report when it ends
            return now + ttl_ms / 1000
        return now + self.interval

    def _ended(self) -> None:
        """The hold ended: quiet if released or lost, a WARNING if its handle was dropped."""
        hold = self.hold
        if hold.dropped():
            logger.warning(
                "cronlock: lock %r was garbage-collected while held (never released); "
                "renewal stopped, the key expires on the store within its ttl (%g s)",
                hold.key,
                hold.ttl_ms / 1000,
            )

    def _failed(self, error: BaseException) -> Optional[float]:
        """The store could not be asked: retry while the lease may still be valid."""
        hold = self.hold
        left = hold.remaining()
        if left <= 0:
            hold.mark_lost(f"renewal failed ({error!r}) until the lease ran out")
            self._ended()
            return None
        logger.warning(
            "cronlock: renewing lock %r failed (%r); retrying, lease valid %.3f s more",
            hold.key,
            error,
            left,
        )
        return monotonic() + max(0.05, min(self.interval, left))

    def __repr__(self) -> str:
        return f"Renewal({self.hold!r})"


class _LeaseWatch:
    """A renewing hold's lease deadline on the deadline heap (never waits for the store)."""

    __slots__ = ("hold",)

    def __init__(self, hold: RenewableHold) -> None:
        self.hold = hold

    def deadline_passed(self) -> Optional[float]:
        hold = self.hold
        if hold.live_token() is None:  # released, re-acquired or already lost
            return None
        left = hold.remaining()  # moved on by every renewal that reached the store in time
        if left > 0:
            return monotonic() + left
        hold.mark_lost("its lease ran out before a renewal reached the store")
        return None


class _Ticket:
    """The holds' one entry in the shared renewer; a superseded ticket stops itself."""

    __slots__ = ("due", "holds")

    def __init__(self, holds: Holds, due: float) -> None:
        self.holds = holds
        self.due = due

    def renew_due(self) -> Optional[float]:
        return self.holds.serve(self)

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
        """Stop renewing ``renewal`` (its hold ended); never sends anything to the store."""
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
            return [r.hold.client for r in self._live if r.hold.client is not None]

    def _push(self, renewal: Renewal) -> None:
        seq = next(self._seq)
        self._live[renewal] = seq
        heapq.heappush(self._heap, (renewal.due, seq, renewal))

    def _compact(self) -> None:
        """Drop heap entries of ended holds (amortised O(1) per discard)."""
        self._heap = [entry for entry in self._heap if self._live.get(entry[2]) == entry[1]]
        heapq.heapify(self._heap)

    def serve(self, ticket: _Ticket) -> Optional[float]:
        """Renew what is due; the next due time, or None when this ticket is done."""
        with self._mutex:
            if ticket is not self._ticket:
                return None
            now = monotonic()
            due: list[Renewal] = []
            heap = self._heap
            while heap and (heap[0][0] <= now or self._live.get(heap[0][2]) != heap[0][1]):
                _, seq, renewal = heapq.heappop(heap)
                if self._live.get(renewal) == seq:
                    del self._live[renewal]
                    due.append(renewal)
        for renewal in due:
            nxt = renewal.renew_due()  # store I/O: outside the mutex
            if nxt is not None:
                renewal.due = nxt
                with self._mutex:
                    if self._pid == os.getpid() and renewal.hold.live_token() is not None:
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

    def after_fork_in_child(self) -> None:
        """Start empty, with a new mutex: the parent's may have been held at the fork."""
        self._mutex = threading.Lock()
        self._reset()


#: This process's renewing lock holds.
HOLDS = Holds()


def _after_fork_in_child() -> None:
    HOLDS.after_fork_in_child()


_forksafe.clients_from(HOLDS.clients)  # their pools are held across fork()
_forksafe.on_fork(_forksafe.Phase.STATE, after_in_child=_after_fork_in_child)
