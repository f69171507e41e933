"""Waiting for a lock by polling, for stores that cannot wake a waiter (SQL).

A waiter tries, and when the lock is held sleeps for a backoff that doubles from
`FIRST_POLL` up to `MAX_POLL`, cut short to the holder's remaining lease (so a lock whose
holder died is taken as soon as it lapses) and to the wait left. So a release is noticed
within `MAX_POLL` seconds (the wake-up latency), and a waiter costs the store at most
``1 / MAX_POLL`` tries per second once it has waited a while. Waiters are not served in
arrival order: whoever tries first after the release wins.
"""

from __future__ import annotations

from typing import Callable, Optional

from cronlock.clock import monotonic, sleep
from cronlock.errors import LockNotAcquired

__all__ = ["FIRST_POLL", "MAX_POLL", "poll_acquire"]

#: The first sleep of a waiter (seconds); each next one doubles, up to `MAX_POLL`.
FIRST_POLL = 0.005
#: The longest sleep between two tries: the bound on noticing a release.
MAX_POLL = 0.1

#: One try: (fencing token, None) when won, else (None, the holder's lease left in ms).
Attempt = Callable[[], tuple[Optional[int], int]]


def poll_acquire(attempt: Attempt, *, wait_ms: int, name: str) -> tuple[int, float]:
    """Try until won or ``wait_ms`` has passed: (fencing token, when the win was sent).

    Raises:
        LockNotAcquired: still held when the wait ran out.
    """
    sent = monotonic()
    deadline = sent + wait_ms / 1000
    pause = FIRST_POLL
    while True:
        fence, left_ms = attempt()
        if fence is not None:
            return fence, sent
        left = deadline - monotonic()
        if left <= 0:
            raise LockNotAcquired(name, f"lock {name!r} not acquired within {wait_ms / 1000:g} s")
        sleep(max(0.001, min(pause, left, left_ms / 1000 + 0.001)))
        pause = min(pause * 2, MAX_POLL)
        sent = monotonic()
