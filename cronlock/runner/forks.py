"""Runners across ``fork()``: each runner of the parent becomes a runner of its own in the
child, restarted if it was running (``after_fork="restart"``).

Registered in the `cronlock._forksafe` registry in phase
``THREADS``, so it runs after the pools are released and the renewal heaps are reset.
The pools of every runner's client are held across the fork, so the child's copy of a
runner, and the application, can use the client at once.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Protocol

from cronlock import _forksafe

logger = logging.getLogger("cronlock")


class Forkable(Protocol):
    """A runner, as far as fork handling is concerned."""

    client: Any  # the redis-py client behind its store (None for another store)

    def after_fork_in_child(self) -> None:
        """Become a runner of this process."""


_runners: weakref.WeakSet[Any] = weakref.WeakSet()


def track(runner: Forkable) -> None:
    """Carry ``runner`` across every fork from now on (it is held weakly)."""
    _runners.add(runner)


def tracked() -> list[Any]:
    """Every runner of this process that is still alive (started or not)."""
    return list(_runners)


def _after_fork_in_child() -> None:
    for runner in list(_runners):
        try:
            runner.after_fork_in_child()
        except Exception:
            logger.exception("cronlock: could not restart %r after fork", runner)


def _clients() -> list[Any]:
    return [runner.client for runner in list(_runners) if runner.client is not None]


_forksafe.clients_from(_clients)
_forksafe.on_fork(_forksafe.Phase.THREADS, after_in_child=_after_fork_in_child)
