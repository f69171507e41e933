"""The live renewing lock holds of a process: one heap, one ticket per server.

Each server identity (`cronlock.lock.renewer.server_of`: a connection pool, a cluster
client, a SQL store) has a `Holds`: the live holds on that server, kept on a small heap
of their own and sitting in *that server's* renewer (`get_renewer(server)`) as one entry,
a `_Ticket` due at the earliest live renewal. `HOLDS` (a `HoldsByServer`) finds the
`Holds` of a hold's server. So:

* an acquire costs a dict insert and a heap push on its server's heap of live holds,
  and a push to that server's renewer only when it brings the earliest due time forward;
* a release removes the hold at once (a dict delete): released holds never wake a
  renewal thread, however many acquire/release cycles a process runs per second;
* a renewal hung on one server (a socket read on a paused host) holds up only that
  server's holds: another server's are renewed from their own thread on time.

The registry references servers weakly: the `Holds` of a client that was dropped goes
away with it (its holds reference the client, so only once they have ended).

Fork: a forked child starts with no holds (each `Holds` is emptied, with a new mutex),
so a lock held by the parent is never renewed by the child. `_forksafe.clients_from`
lists the clients of every live hold on every server, so their pools are held across
``fork()`` and no renewal thread is inside one at that moment.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import weakref
from typing import Any, Optional

from cronlock import _forksafe
from cronlock.clock import monotonic
from cronlock.lock._renewal import Renewal
from cronlock.lock.renewer import Renewer, get_renewer, server_of

logger = logging.getLogger("cronlock.lock")

#: Ended holds' heap entries tolerated before a compaction (beyond twice the live ones).
_COMPACT_AT = 16


class _Ticket:
    """A `Holds`' one entry in its server's renewer; a superseded ticket stops itself."""

    __slots__ = ("due", "holds")

    def __init__(self, holds: Holds, due: float) -> None:
        self.holds = holds
        self.due = due

    def renew_due(self) -> Optional[float]:
        return self.holds.serve(self)

    def __repr__(self) -> str:
        return "Renewal(held locks)"


class Holds:
    """The live renewing holds on one server, served from that server's renewer."""

    def __init__(self, renewer: Renewer) -> None:
        self._renewer = renewer  # never the server itself: the registry is weak
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
        self._renewer.schedule(ticket, ticket.due)

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

    def queued(self) -> int:
        """Heap entries, ended holds' included (compacted as holds are discarded)."""
        with self._mutex:
            return len(self._heap)

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
            try:
                nxt = renewal.renew_due()  # store I/O: outside the mutex
            except Exception:  # never let one hold end the renewal of the others
                logger.exception("cronlock: renewal of %r raised", renewal)
                nxt = monotonic() + renewal.interval
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


class HoldsByServer:
    """The `Holds` of each server identity, made on first use (servers held weakly)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_server: weakref.WeakKeyDictionary[Any, Holds] = weakref.WeakKeyDictionary()
        self._default: Optional[Holds] = None  # holds whose store names no server

    def of(self, server: object) -> Holds:
        """The holds on ``server`` (see `server_of`); None: the shared renewer's."""
        identity = server_of(server)
        with self._lock:
            if identity is None:
                if self._default is None:
                    self._default = Holds(get_renewer())
                return self._default
            holds = self._by_server.get(identity)
            if holds is None:
                holds = self._by_server[identity] = Holds(get_renewer(identity))
            return holds

    def add(self, renewal: Renewal) -> None:
        """Renew ``renewal`` from its server's renewer until discarded."""
        holds = renewal.holds = self.of(renewal.hold.server)
        holds.add(renewal)

    def discard(self, renewal: Renewal) -> None:
        """Stop renewing ``renewal``; never sends anything to the store."""
        holds = renewal.holds
        if isinstance(holds, Holds):
            holds.discard(renewal)

    def all(self) -> list[Holds]:
        """Every server's `Holds` (those of dropped servers are gone)."""
        with self._lock:
            found = list(self._by_server.values())
            return found if self._default is None else [self._default, *found]

    def __len__(self) -> int:
        return sum(len(holds) for holds in self.all())

    def clients(self) -> list[Any]:
        """The clients of every live hold on every server (for fork safety)."""
        return [client for holds in self.all() for client in holds.clients()]

    def after_fork_in_child(self) -> None:
        """Every server's holds start empty, each with a new mutex."""
        self._lock = threading.Lock()
        for holds in self.all():
            holds.after_fork_in_child()


#: This process's renewing lock holds, per server.
HOLDS = HoldsByServer()

_forksafe.clients_from(HOLDS.clients)  # their pools are held across fork()
_forksafe.on_fork(_forksafe.Phase.STATE, after_in_child=HOLDS.after_fork_in_child)
