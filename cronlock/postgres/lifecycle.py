"""Process lifecycle of the histories: a forked child starts empty; exit flushes.

Hooks are installed once, on demand (the first history made; the first write), never
at import.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import Protocol

from cronlock import _forksafe

__all__ = ["CLOSE_AT_EXIT_S", "Managed", "install_atexit", "track"]

CLOSE_AT_EXIT_S = 5.0  # how long interpreter exit waits for buffered writes


class Managed(Protocol):
    """What the hooks need of a history."""

    def reset_after_fork(self) -> None: ...

    def close_at_exit(self, timeout: float) -> None: ...


class _Hooks:
    lock = threading.Lock()
    fork_installed = False
    atexit_installed = False


_instances: weakref.WeakSet[Managed] = weakref.WeakSet()


def track(history: Managed) -> None:
    """Reset ``history`` in every forked child from now on."""
    with _Hooks.lock:
        _instances.add(history)
        if not _Hooks.fork_installed:
            _forksafe.on_fork(_forksafe.Phase.STATE, after_in_child=_after_fork_in_child)
            _Hooks.fork_installed = True


def install_atexit() -> None:
    """Flush every history at interpreter exit (called when a writer first starts)."""
    with _Hooks.lock:
        if not _Hooks.atexit_installed:
            atexit.register(_close_all_at_exit)
            _Hooks.atexit_installed = True


def _after_fork_in_child() -> None:
    # The parent keeps writing what it had buffered; the child starts empty, with its
    # own locks (the parent's may have been held by a thread that does not exist here).
    _Hooks.lock = threading.Lock()
    for history in list(_instances):
        history.reset_after_fork()


def _close_all_at_exit() -> None:
    for history in list(_instances):
        history.close_at_exit(CLOSE_AT_EXIT_S)
