"""The renewal of one held lock: what it asks of the hold, how it renews, when it stops.

Each hold of a [`LeaseLock`][cronlock.lock.LeaseLock] (on Redis or another store) with
``renew=True`` gets a `Renewal`, due every ``ttl / 3``. Renewals are kept per server by
`cronlock.lock._holds.HOLDS` and served from that server's renewal thread
(`cronlock.lock.renewer.get_renewer`), so a renewal hung on one server delays no
renewal of a lock on another.

A renewal:

* stops quietly once the hold ends (release, re-acquire: a generation number tells);
* stops with a WARNING naming the key once the handle was garbage-collected without a
  release: holds reference their handle weakly (`RenewableHold.dropped`), so a dropped
  handle's lease lapses on the store within its ttl instead of being renewed for as long as
  the process lives (the runner's job leases are held by their running ``Run``, which
  its server's renewer references strongly, and are not affected);
* marks the lock lost (WARNING, ``on_lost``) when the script says the key is not ours;
* on a store error (one of the hold's ``errors``), logs a WARNING and retries while the
  lease may still be valid, and marks the lock lost once
  [`remaining`][cronlock.lock.LeaseLock.remaining] reaches 0;
* with ``max_hold``, asks for shorter leases so the lock ends ``max_hold`` after the
  acquire, then marks it lost if it is still held;
* before its first store call, arms a `_LeaseWatch` on the deadline heap, which
  marks the lock lost when the lease runs out even while a renewal hangs on a store that
  does not answer. Holds released before their first renewal (most) never pay for it.
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Protocol, Union

from cronlock.clock import monotonic
from cronlock.lock.renewer import get_deadlines

logger = logging.getLogger("cronlock.lock")


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
    def server(self) -> Any:
        """Whose renewal thread renews the hold (`cronlock.lock.renewer.server_of`):
        the client, or the SQL store; None: the process's shared one."""

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

    __slots__ = ("due", "hold", "holds", "interval", "watched")

    def __init__(self, hold: RenewableHold, due: float) -> None:
        self.hold = hold
        self.holds: Any = None  # the server's `Holds` that renews it, once added
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
        ok = self._extend(token, ttl_ms)
        if isinstance(ok, BaseException):
            return self._failed(ok)
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

    def _extend(self, token: str, ttl_ms: int) -> Union[bool, BaseException]:
        """The store's answer to the extend, or the error that kept it from answering."""
        hold = self.hold
        try:
            return bool(hold.extend(token, ttl_ms))
        except hold.errors as error:
            return error
        except Exception as error:  # e.g. OSError from a client closed under the lock:
            # one hold's surprise must not stop the renewal of every other hold
            logger.exception("cronlock: renewing lock %r raised", hold.key)
            return error

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
