"""The one at-fork registry runs every hook in its phase's order, whatever the import order."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from cronlock import _forksafe
from cronlock._forksafe import Phase

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


@pytest.fixture(autouse=True)
def _restore_hooks() -> Iterator[None]:
    """Each test's hooks leave the registry with it (later forks must not run them)."""
    saved = list(_forksafe._hooks)
    yield
    _forksafe._hooks[:] = saved


def test_hooks_run_in_phase_order_not_registration_order() -> None:
    """Registered threads-first, the hooks still run pools, state, threads after a fork
    (in the parent and in the child) and in reverse phase order before it."""
    calls: list[str] = []
    for phase in (Phase.THREADS, Phase.STATE, Phase.POOLS):
        name = phase.name.lower()
        _forksafe.on_fork(
            phase,
            before=lambda name=name: calls.append(f"before {name}"),
            after_in_parent=lambda name=name: calls.append(f"parent {name}"),
            after_in_child=lambda name=name: calls.append(f"child {name}"),
        )
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what ran here, then leave at once
        os.close(read)
        os.write(write, ",".join(c for c in calls if c.startswith("child")).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    mine = [c for c in calls if not c.startswith("child")]
    assert mine[:3] == ["before threads", "before state", "before pools"]
    assert mine[3:6] == ["parent pools", "parent state", "parent threads"]
    assert child[:3] == ["child pools", "child state", "child threads"]


def test_a_hook_that_raises_does_not_stop_the_others() -> None:
    """A broken hook is logged; the hooks after it still run, and fork() returns."""
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("broken hook")

    _forksafe.on_fork(Phase.STATE, after_in_parent=broken)
    _forksafe.on_fork(Phase.THREADS, after_in_parent=lambda: ran.append("after"))
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert ran == ["after"]
