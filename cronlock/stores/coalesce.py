"""Calls from many threads that arrive while one batch is on the wire go in the next one.

A burst of short runs ends in a burst of finishes from every worker at once; sent one
round trip each, they queue behind each other on the server and on the GIL. A
`Coalescer` is group commit without a thread of its own: the first caller to find no
batch in flight sends every call queued so far in one batch and hands each caller its
own reply; callers that arrive meanwhile wait, and the first of them sends the next
batch. A lone caller pays one lock more than a direct call; each caller still gets its
own reply or its own exception, so what a call returns does not change.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Generic, TypeVar

from cronlock import _forksafe

T = TypeVar("T")

#: Sends a batch of calls; each call's reply, or the exception in its place, in order.
SendBatch = Callable[[Sequence[T]], Sequence[Any]]


class _Waiting:
    __slots__ = ("answered", "call", "reply")

    def __init__(self, call: Any) -> None:
        self.call = call
        self.answered = False
        self.reply: Any = None


class Coalescer(Generic[T]):
    """Batches of calls, one batch in flight at a time (see the module docstring)."""

    def __init__(self, send: SendBatch[T]) -> None:
        self._send = send
        self.after_fork_in_child()
        _LIVE.add(self)

    def after_fork_in_child(self) -> None:
        """Start empty, with a new lock: the parent's may have been held at the fork, and
        its queued calls are the parent's threads'."""
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Waiting] = []
        self._sending = False

    def call(self, call: T) -> Any:
        """This call's reply, sent in the next batch; raises the exception in its place."""
        mine = _Waiting(call)
        with self._cond:
            self._queue.append(mine)
            while self._sending and not mine.answered:
                self._cond.wait()
            if not mine.answered:
                batch, self._queue = self._queue, []
                self._sending = True
        if not mine.answered:
            self._lead(batch)
        if isinstance(mine.reply, BaseException):
            raise mine.reply
        return mine.reply

    def waiting(self) -> int:
        """How many calls wait for the next batch (for tests and debugging)."""
        with self._cond:
            return len(self._queue)

    def _lead(self, batch: list[_Waiting]) -> None:
        """Send ``batch`` and hand out its replies; then let the next batch go."""
        try:
            replies: Sequence[Any] = self._send([w.call for w in batch])
        except BaseException as error:  # every caller of the batch sees the failure
            replies = [error] * len(batch)
        with self._cond:
            for waiting, reply in zip(batch, replies):
                waiting.reply = reply
                waiting.answered = True
            self._sending = False
            self._cond.notify_all()


_LIVE: weakref.WeakSet[Coalescer[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for coalescer in list(_LIVE):
        coalescer.after_fork_in_child()


_forksafe.on_fork(_forksafe.Phase.STATE, after_in_child=_after_fork_in_child)
