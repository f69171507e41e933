"""One renewing hold of a lock, as the renewal thread sees it, holding the handle weakly.

The renewal thread must not keep alive a handle that its owner dropped without
releasing: the key would be renewed for as long as the process lives, with nobody able
to release it. So a `WeakHold` reaches its handle only through weak references. Once the
handle is garbage-collected, `live_token()` is None and `dropped()` True (unless the
hold had already ended), so the renewal stops, logs a WARNING and lets the lease lapse.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

WeakRef = Callable[[], Optional[Any]]  # a weakref.ref or weakref.WeakMethod


class WeakHold:
    """One hold (one acquire) of a lock: the `RenewableHold` a `Renewal` is given.

    What is fixed for the hold is copied at the acquire; the rest is asked of the handle
    through weak references, and the generation number tells when the hold ended.
    """

    __slots__ = (
        "_extend",
        "_generation",
        "_handle",
        "_live_token",
        "_mark_lost",
        "_valid_until",
        "acquired_at",
        "client",
        "ended",
        "errors",
        "key",
        "max_hold",
        "server",
        "ttl_ms",
    )

    def __init__(
        self,
        handle: WeakRef,
        *,
        key: str,
        client: Any,
        server: Any,
        errors: tuple[type[BaseException], ...],
        ttl_ms: int,
        max_hold: Optional[float],
        acquired_at: float,
        live_token: WeakRef,
        valid_until: WeakRef,
        extend: WeakRef,
        mark_lost: WeakRef,
        generation: int,
    ) -> None:
        self._handle = handle
        self._live_token = live_token
        self._valid_until = valid_until
        self._extend = extend
        self._mark_lost = mark_lost
        self._generation = generation
        self.key = key
        self.client = client
        self.server = server
        self.errors = errors
        self.ttl_ms = ttl_ms
        self.max_hold = max_hold
        self.acquired_at = acquired_at
        #: Set (under the lock's state mutex) once the hold is released or lost.
        self.ended = False

    @property
    def valid_until(self) -> float:
        method = self._valid_until()
        return 0.0 if method is None else float(method())

    def live_token(self) -> Optional[str]:
        method = self._live_token()
        return None if method is None else method(self._generation)

    def dropped(self) -> bool:
        return not self.ended and self._handle() is None

    def remaining(self) -> float:
        handle = self._handle()
        return 0.0 if handle is None else float(handle.remaining())

    def extend(self, token: str, ttl_ms: int) -> bool:
        method = self._extend()
        return method is not None and bool(method(token, ttl_ms))

    def mark_lost(self, reason: str) -> None:
        method = self._mark_lost()
        if method is not None:
            method(reason)

    def __repr__(self) -> str:
        handle = self._handle()
        return f"<dropped lock {self.key!r}>" if handle is None else repr(handle)
