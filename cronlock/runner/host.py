"""What the parts of one runner share: the store, the clock, who it is, counters, reports.

The scheduler, each run and the operations thread are handed a `RunnerHost` instead of
the runner: it is the whole of what they may use of it.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from typing import Any, Callable, Optional

from cronlock._stats import StatsCounter
from cronlock.clock import Clock
from cronlock.context import ErrorContext
from cronlock.stores import Store
from cronlock.stores.types import NO_RETENTION, Replication, Retention

logger = logging.getLogger("cronlock")

ErrorHandler = Callable[[BaseException, ErrorContext], Any]


class RunnerHost:
    """The services of one runner that its parts use (see the module docstring).

    Attributes:
        store: where shared state lives.
        clock: the injected clock (which slot is due).
        retention: how much run history the store keeps per job.
        observers: told of claims and runs.
        runner_id, holder: who this runner is (``holder`` is ``"host:pid:runner_id"``).
        replication: what claims and finishes wait for (``wait_replicas``), or None.
        stopping: set by ``stop()``: no new claims; a cancelled run is handed over.
        stats: the counters behind ``runner.statistics()``.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        retention: Retention = NO_RETENTION,
        observers: Sequence[object] = (),
        on_error: Optional[ErrorHandler] = None,
        replication: Optional[Replication] = None,
    ) -> None:
        self.store = store
        self.replication = replication
        self.clock = clock
        self.retention = retention
        self.observers = tuple(observers)
        self.on_error = on_error
        self.stats = StatsCounter()
        self.stopping = False
        self.runner_id = ""
        self.holder = ""
        self.new_identity()

    def new_identity(self) -> None:
        """A fresh runner id (at creation, and in a forked child: without it every
        forked copy would share the parent's heartbeat and name the parent's pid)."""
        self.runner_id = secrets.token_hex(4)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{self.runner_id}"

    def count(self, name: str) -> None:
        """Add one to counter ``name`` of `RunnerStatistics`."""
        self.stats.add(name)

    def report(self, error: BaseException, context: ErrorContext) -> None:
        """Hand an error to ``on_error``, or log it; never raises."""
        if self.on_error is not None:
            try:
                self.on_error(error, context)
                return
            except Exception:
                logger.exception("cronlock: on_error raised while handling %r", error)
        level = logging.ERROR if context.phase == "handler" else logging.WARNING
        logger.log(
            level,
            "cronlock: job %r failed in phase %s (slot %s): %s",
            context.key,
            context.phase,
            context.slot.isoformat() if context.slot else "-",
            error,
            exc_info=error,
        )

    def announce_handover(self, key: str, slot_ms: int) -> None:
        """Tell the other replicas a lease was ended early, so one takes the slot at once.

        Without this they would look again only when the lease they last saw lapses
        (up to a whole ttl later), and a newer slot may have replaced it by then.
        """
        try:
            self.store.publish({"type": "handover", "key": key, "slot": slot_ms})
        except self.store.errors as exc:  # they still find the slot when the old lease lapses
            self.report(exc, ErrorContext(key, "release", slot_ms))
