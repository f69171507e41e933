"""Processes a test starts: each in a process group of its own, always ended as a group.

Every process the suite starts goes through :func:`spawn` (or :func:`running` /
:func:`run`), which puts it in a new session (``start_new_session=True``), and is ended
with :func:`end` in a ``finally``. :func:`end` signals the whole group, so the children
of a child (gunicorn workers, the serving child of ``flask run --reload``, the command
under ``cronlock exec``) go too, and it ends with SIGKILL for whatever is left, so
nothing outlives the test whatever happened in it.

Stop processes with SIGTERM, never SIGINT: a shell starts background jobs (``cmd &``,
``nohup``) with SIGINT ignored, and an ignored signal is inherited, so a child that
relies on Python's default KeyboardInterrupt never sees it. Send SIGINT only where
SIGINT handling is what the test checks (the program installs its own handler, which
overrides the inherited disposition).

``tests/conftest.py`` checks after every test that no group the test started is still
alive (see :func:`alive_since`); a leak is ended there and fails the test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional, Union

Args = Union[str, Sequence[Union[str, "os.PathLike[str]"]]]

_started: list[subprocess.Popen[Any]] = []


def spawn(args: Args, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **kwargs)`` in a new session (its own process group)."""
    proc: subprocess.Popen[Any] = subprocess.Popen(args, start_new_session=True, **kwargs)
    _started.append(proc)
    return proc


def signal_group(proc: subprocess.Popen[Any], signum: int) -> bool:
    """Send ``signum`` to every process of ``proc``'s group; False if none is left."""
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(proc: subprocess.Popen[Any]) -> bool:
    """True while any process of ``proc``'s group is alive (zombies aside)."""
    if proc.poll() is None:
        return True
    return signal_group(proc, 0)


def end(proc: subprocess.Popen[Any], signum: int = signal.SIGTERM, timeout: float = 30.0) -> int:
    """End ``proc``'s whole process group and return the leader's exit status.

    A live leader gets SIGCONT (in case a test stopped it) and ``signum``, sent to the
    group, and ``timeout`` seconds to exit; then whatever is left of the group is
    SIGKILLed and the leader reaped. Safe to call on a process that already exited.
    """
    if proc.poll() is None:
        signal_group(proc, signal.SIGCONT)
        signal_group(proc, signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    signal_group(proc, signal.SIGKILL)
    return proc.wait(10)  # its pipes stay open: the test may still read what it wrote


def end_all(
    procs: Sequence[subprocess.Popen[Any]], signum: int = signal.SIGTERM, timeout: float = 30.0
) -> list[int]:
    """:func:`end` several processes, signalling every group first so they stop in
    parallel; their exit statuses, in order."""
    for proc in procs:
        if proc.poll() is None:
            signal_group(proc, signal.SIGCONT)
            signal_group(proc, signum)
    return [end(proc, signum, timeout) for proc in procs]


@contextlib.contextmanager
def running(
    args: Args, *, stop_signal: int = signal.SIGTERM, timeout: float = 30.0, **kwargs: Any
) -> Iterator[subprocess.Popen[Any]]:
    """Start ``args`` with :func:`spawn`; :func:`end` its group when the block exits."""
    proc = spawn(args, **kwargs)
    try:
        yield proc
    finally:
        end(proc, stop_signal, timeout)


def run(
    args: Args,
    *,
    timeout: float,
    check: bool = False,
    capture_output: bool = False,
    input: Optional[Union[str, bytes]] = None,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """Like ``subprocess.run``, but in a group of its own that is ended in any case: on
    a timeout the whole group gets SIGTERM, then SIGKILL (``subprocess.run`` kills only
    the child), and ``subprocess.TimeoutExpired`` is raised."""
    if capture_output:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
    if input is not None:
        kwargs.setdefault("stdin", subprocess.PIPE)
    proc = spawn(args, **kwargs)
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    finally:  # after a timeout, or the child's children after a normal exit
        end(proc, timeout=5)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def spawn_listening(
    make_args: Callable[[int], Args], **kwargs: Any
) -> tuple[subprocess.Popen[Any], int]:
    """:func:`spawn` a server on a listening socket bound here and passed down; return it
    and the port. ``make_args(fd)`` builds the command line that tells the server to use
    file descriptor ``fd`` (gunicorn: ``-b fd://FD``).

    Picking a free port and letting the server bind it later races other processes (a
    parallel worker may take it first, or be what answers there); a socket bound by the
    test and inherited by the server cannot be taken by anyone else."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        fd = listener.fileno()
        proc = spawn(make_args(fd), pass_fds=(fd,), **kwargs)
        return proc, int(listener.getsockname()[1])  # closed here: only the child has it


def reap(pid: int, timeout: float = 30.0) -> int:
    """Wait for the forked child ``pid`` (bounded: SIGKILLed after ``timeout`` seconds)
    and return its exit code, as ``os.waitstatus_to_exitcode`` gives it. Call it in a
    ``finally`` after ``os.fork()``, so a failing parent never leaves its child behind."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        time.sleep(0.01)


def alive_since(mark: int) -> list[subprocess.Popen[Any]]:
    """Processes started after ``len(started())`` was ``mark`` whose group is alive."""
    return [p for p in _started[mark:] if group_alive(p)]


def started() -> list[subprocess.Popen[Any]]:
    """Every process :func:`spawn` started in this pytest process, oldest first."""
    return _started
