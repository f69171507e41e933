"""`LeaseLock`: one holder per key at a time, on any store's `Leases` (see `cronlock.lock`).

The handle's machinery lives here, whatever keeps the lease: the random token and the
fencing token of each hold, the loss (``lost``, ``on_lost``, `LockLost` at ``with``
exit), registration with the renewal thread, ``remaining``/``check`` on this process's
monotonic clock, and fork safety. The store's part is its `Leases`.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional

from cronlock._validate import Seconds, seconds_to_ms
from cronlock.clock import monotonic
from cronlock.errors import LockLost
from cronlock.lock._hold import WeakHold
from cronlock.lock._holds import HOLDS
from cronlock.lock._lease import check_wait, drift
from cronlock.lock._leases import Leases
from cronlock.lock._renewal import Renewal

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["LeaseLock", "OnLost"]

_MAX_INT_TTL = 10**9  # seconds; larger ints take the general path
_UNSET: Any = object()

OnLost = Callable[["LeaseLock"], Any]


class LeaseLock:
    """A lease on ``leases.key``, held by at most one owner at a time while it is valid.

    Use it as a context manager (``with lock:``, or through
    [`redis_lock`][cronlock.lock.redis_lock] and
    [`store_lock`][cronlock.stores.store_lock]), or call
    [`acquire`][cronlock.lock.LeaseLock.acquire] and
    [`release`][cronlock.lock.LeaseLock.release] yourself. One handle holds the lock at
    most once at a time; it may be re-acquired after release, each time with a new token.

    Args:
        leases: the store's part (`Leases`): acquire, extend and release of one key.
        ttl: the lease, in seconds (int, float or timedelta; millisecond precision).
        wait: ``None`` (default): raise [`LockNotAcquired`][cronlock.errors.LockNotAcquired] at once
            when the lock is held. Seconds: wait up to that long (how a waiter learns of
            the release is the store's: see docs/locks.md).
        renew: extend the lease every ``ttl / 3`` from its server's renewal thread
            while the lock is held.
        max_hold: with ``renew``, stop renewing so that the lease ends this many seconds
            after acquiring (the lock is then reported lost if still held).
        on_lost: called with this handle (from a cronlock thread, or from the thread
            that releases) the first time the lock is found lost. Exceptions it raises
            are logged, not propagated.

    Thread safety: any thread may release, extend or check a handle; the token lives
    on the handle, not in thread-local storage. Fork safety: a handle acquired in one
    process is never released, renewed or extended from a forked child; the child's
    attempts are logged and ignored.
    """

    def __init__(
        self,
        leases: Leases,
        ttl: Seconds,
        *,
        wait: Optional[Seconds] = None,
        renew: bool = False,
        max_hold: Optional[Seconds] = None,
        on_lost: Optional[OnLost] = None,
    ) -> None:
        self._leases = leases
        self.key = leases.key
        self.prefix = leases.prefix
        # Fast path for the common whole-second ttl (same result as seconds_to_ms).
        if type(ttl) is int and 0 < ttl < _MAX_INT_TTL:
            self._ttl_ms = ttl * 1000
        else:
            self._ttl_ms = seconds_to_ms(ttl, "ttl")
        self._wait_ms = check_wait(wait)
        if not isinstance(renew, bool):
            raise TypeError(f"renew must be True or False; got {renew!r}")
        self._max_hold = None if max_hold is None else seconds_to_ms(max_hold, "max_hold") / 1000
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable or None; got {on_lost!r}")
        self._renew = renew
        self._on_lost = on_lost
        self._lost = False
        self._lost_told = False  # the WARNING and on_lost are done: ``lost`` may be set
        self._lost_event: Optional[threading.Event] = None
        self._renewal: Optional[Renewal] = None
        self._hold: Optional[WeakHold] = None  # the renewing hold, told when it ends
        #: The random token of the current (or last) hold; "" before the first acquire.
        self.token = ""
        #: The fencing token of the current (or last) hold; 0 before the first acquire.
        self.fencing_token = 0
        self._state = threading.Lock()
        self._held = False
        self._releasing = False
        self._generation = 0
        self._pid = 0
        self._acquired_at = 0.0
        self._valid_until = 0.0

    @property
    def lost(self) -> threading.Event:
        """Set (never cleared while held) once the lock is found expired or taken.

        A `threading.Event`, created on first use (most holds never need one). It
        is set after the WARNING is logged and ``on_lost`` has returned, so a thread it
        wakes sees both done.
        """
        with self._state:
            if self._lost_event is None:
                self._lost_event = threading.Event()
                if self._lost_told:
                    self._lost_event.set()
            return self._lost_event

    # -- acquiring -------------------------------------------------------------------

    def acquire(self, *, wait: Optional[Seconds] = _UNSET) -> Self:
        """Take the lock, or raise [`LockNotAcquired`][cronlock.errors.LockNotAcquired].

        Returns this handle.

        Args:
            wait: overrides the handle's ``wait`` for this call (``None``: do not wait).

        Raises:
            LockNotAcquired: held elsewhere (and, with ``wait``, not freed in time).
            Exception: one of the store's ``errors`` (``redis.RedisError``,
                ``sqlite3.Error``, ...): the store could not be asked; nothing is held
                (fail closed).
            RuntimeError: this handle already holds the lock.
        """
        wait_ms = self._wait_ms if wait is _UNSET else check_wait(wait)
        with self._state:
            if self._held:
                raise RuntimeError(f"lock {self.key!r} is already held by this handle")
            token = secrets.token_hex(16)
        fence, sent = self._leases.acquire(token, self._ttl_ms, wait_ms)
        self._won(token, fence, sent)
        return self

    def _won(self, token: str, fence: int, sent: float) -> None:
        ttl = self._ttl_ms / 1000
        renewal = None
        with self._state:
            self.token = token
            self.fencing_token = fence
            if self._lost:
                self._lost = self._lost_told = False
                if self._lost_event is not None:
                    self._lost_event.clear()
            self._held = True
            self._releasing = False
            self._generation += 1
            self._pid = os.getpid()
            self._acquired_at = sent
            self._valid_until = sent + ttl - drift(ttl)
            if self._renew:
                hold = self._hold = self._weak_hold()
                renewal = self._renewal = Renewal(hold, sent + ttl / 3)
        logger.debug("cronlock: acquired lock %r (fencing token %d)", self.key, fence)
        if renewal is not None:
            HOLDS.add(renewal)

    def _weak_hold(self) -> WeakHold:
        """This hold as the renewal sees it, referencing this handle weakly (under ``_state``)."""
        return WeakHold(
            weakref.ref(self),
            key=self.key,
            client=self._leases.client,
            server=getattr(self._leases, "server", None) or self._leases.client,
            errors=self._leases.errors,
            ttl_ms=self._ttl_ms,
            max_hold=self._max_hold,
            acquired_at=self._acquired_at,
            live_token=weakref.WeakMethod(self._live_token),
            valid_until=weakref.WeakMethod(self._deadline),
            extend=weakref.WeakMethod(self._extend),
            mark_lost=weakref.WeakMethod(self._mark_lost),
            generation=self._generation,
        )

    def _live_token(self, generation: int) -> Optional[str]:
        """The token while hold ``generation`` is held, not being released and not lost."""
        with self._state:
            live = self._generation == generation and self._held and not self._releasing
            return self.token if live and not self._lost else None

    def _deadline(self) -> float:
        return self._valid_until

    # -- while held ------------------------------------------------------------------

    @property
    def ttl(self) -> float:
        """The lease length in seconds."""
        return self._ttl_ms / 1000

    @property
    def held(self) -> bool:
        """True from a successful acquire until release or loss (no store call)."""
        return self._held and not self._lost

    def remaining(self) -> float:
        """Seconds the lease is certainly still valid, by this process's monotonic clock.

        It is ttl minus the time since the acquire (or last extend) was *sent*, minus a
        drift margin (1 % of the ttl + 2 ms); 0.0 when not held or lost. No store call.
        """
        if not self.held:
            return 0.0
        return max(0.0, self._valid_until - monotonic())

    def check(self) -> None:
        """Raise [`LockLost`][cronlock.errors.LockLost] unless the lock is held with lease left.

        Cheap (no store call): it reads ``lost`` and
        [`remaining`][cronlock.lock.LeaseLock.remaining].
        """
        if not self.held:
            raise LockLost(self.key, f"lock {self.key!r} is not held")
        if self.remaining() <= 0:
            self._mark_lost("its lease ran out")
            raise LockLost(self.key)

    def extend(self, ttl: Optional[Seconds] = None) -> None:
        """Make the lease last ``ttl`` seconds (default: the lock's ttl) from now.

        One round trip (compare-and-``PEXPIRE`` by token).

        Raises:
            LockLost: the lock is no longer ours (it is then marked lost).
            Exception: one of the store's ``errors``; the lease is unchanged.
        """
        ttl_ms = self._ttl_ms if ttl is None else seconds_to_ms(ttl, "ttl")
        with self._state:
            if not self._held or self._pid != os.getpid():
                raise LockLost(self.key, f"lock {self.key!r} is not held by this process")
            token = self.token
        if not self._extend(token, ttl_ms):
            self._mark_lost("extend found another owner or no key")
            raise LockLost(self.key)

    def _extend(self, token: str, ttl_ms: int) -> bool:
        sent = monotonic()
        if self._leases.extend(token, ttl_ms):
            with self._state:
                if self.token == token:
                    self._valid_until = sent + ttl_ms / 1000 - drift(ttl_ms / 1000)
            return True
        return False

    def _mark_lost(self, reason: str) -> None:
        with self._state:
            if self._lost:
                return
            self._lost = True  # held is False and check() raises from here on
            generation = self._generation
            self._end_hold()
        logger.warning(
            "cronlock: lock %r lost: %s (fencing token %d)", self.key, reason, self.fencing_token
        )
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                logger.exception("cronlock: on_lost callback for lock %r raised", self.key)
        with self._state:
            if self._generation != generation:  # re-acquired meanwhile: a new hold
                return
            self._lost_told = True
            event = self._lost_event
        if event is not None:
            event.set()

    def _end_hold(self) -> None:
        """Tell the renewing hold it ended (so its renewal knows it was not dropped)."""
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.ended = True

    # -- releasing -------------------------------------------------------------------

    def release(self) -> bool:
        """Give the lock up; True if it was still ours, False otherwise.

        One round trip (compare-and-delete by token), which also wakes the first waiter.
        Never deletes another holder's key. If the lock turns out to have been lost, it
        is marked lost (WARNING log, ``on_lost``). Releasing a handle that is not held,
        or from a process other than the one that acquired it (a forked child), sends
        nothing and returns False.
        """
        owned = self._release()
        return bool(owned)

    def _release(self) -> Optional[bool]:
        with self._state:
            if not self._held:
                return None
            if self._pid != os.getpid():
                logger.warning(
                    "cronlock: lock %r was acquired by pid %d; not released from pid %d",
                    self.key,
                    self._pid,
                    os.getpid(),
                )
                return None
            self._releasing = True
            token = self.token
            renewal, self._renewal = self._renewal, None
            self._end_hold()
        if renewal is not None:
            HOLDS.discard(renewal)
        try:
            owned = self._leases.release(token)
        finally:
            with self._state:
                self._held = False
                self._releasing = False
        if not owned:
            self._mark_lost("it had expired or was taken when released")
            return False
        logger.debug("cronlock: released lock %r", self.key)
        return True

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        """Release the lock.

        Raises [`LockLost`][cronlock.errors.LockLost] if the lock was lost and the body did
        not raise.
        """
        was_lost = self._lost
        try:
            owned = self._release()
        except self._leases.errors:
            if exc_type is None:
                raise
            logger.warning("cronlock: releasing lock %r failed", self.key, exc_info=True)
            return
        if exc_type is None and (was_lost or owned is False):
            raise LockLost(self.key)

    def __repr__(self) -> str:
        state = "lost" if self._lost else "held" if self._held else "free"
        return f"<{type(self).__name__} {self.key!r} ttl={self.ttl:g}s {state}>"
