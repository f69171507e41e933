"""``cronlock exec``: a cluster-wide ``flock(1)`` for crontab lines and scripts.

The command runs only while this process holds the lock ``KEY`` on the store the
command line names (Redis, PostgreSQL or SQLite), renewed in the background every
ttl/3. Timeline of one run:

```text
1. acquire KEY (waiting up to --wait seconds); held elsewhere -> exit 75, nothing run
2. start COMMAND as a child (same stdin/stdout/stderr, same process group)
3. SIGTERM/SIGINT/SIGHUP sent to cronlock are forwarded to the child
4. the lock is lost (renewal failed: the store unreachable past the ttl, or the key was
   taken) -> the child gets SIGTERM, then SIGKILL after --grace seconds; exit 76
5. the child exits -> release KEY -> exit with the child's status (128+N for signal N)
```

With ``--slot EXPR`` the command runs at most once per occurrence of a cron expression
across hosts, not merely one host at a time (`cronlock.cli._exec_slot`): before step 2,
the occurrence due now is claimed under the lock; one already claimed, or past
``--slot-grace``, exits 75 without running the command.

Ctrl-C at a terminal already reaches the child (it shares the foreground process group),
so SIGINT is not forwarded a second time while cronlock is the terminal's foreground
job. If cronlock itself is SIGKILLed, the child keeps running and the lock lapses after
``--ttl`` seconds without renewal: keep the ttl short and let renewal carry long runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from types import FrameType
from typing import Any, Optional

import redis

from cronlock._validate import check_key, seconds_to_ms
from cronlock.cli._common import (
    EXIT_FAILURE,
    EXIT_LOCK_LOST,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_TEMPFAIL,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
    add_global_options,
)
from cronlock.cli._connect import close_store, open_store
from cronlock.cli._exec_slot import SlotClaim, SlotPlan, add_slot_options, plan_of
from cronlock.clock import SystemClock
from cronlock.errors import ConfigurationError, LockLost, LockNotAcquired
from cronlock.lock import LeaseLock
from cronlock.stores import RedisStore, Store, store_lock
from cronlock.stores.sql.claimpath import SqlClaimPath
from cronlock.stores.sql.leases import claim_occurrence

NAME = "exec"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL_SECONDS = 0.05


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``exec`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="run a command only while holding a cluster-wide lock (like flock(1))",
        description=(
            "Run COMMAND only while holding the lock KEY on the store (Redis, PostgreSQL or "
            "SQLite), renewed while it runs. "
            "Exits with COMMAND's status; 75 (or --conflict-exit-code) without running it "
            "when another host holds the lock; 76 when the lock was lost while it ran "
            "(COMMAND gets SIGTERM, then SIGKILL after --grace). With --slot EXPR, COMMAND "
            "runs once per occurrence of the cron expression across hosts: a host that finds "
            "the occurrence already claimed, or starts more than --slot-grace after it, "
            "exits 75 without running it."
        ),
        usage="%(prog)s --key KEY --ttl SECONDS [--wait S] [--slot EXPR] [options] "
        "-- COMMAND [ARGS...]",
    )
    add_global_options(parser, suppress=True)
    parser.add_argument("--key", required=True, help="the lock's name, shared by all hosts")
    parser.add_argument(
        "--ttl",
        required=True,
        type=float,
        metavar="SECONDS",
        help="lease; renewed every ttl/3 while COMMAND runs, lapses this long after a crash",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="S",
        help="wait up to S seconds for the lock (default: give up at once)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="S",
        help="after a lost lock, SIGKILL COMMAND if it still runs after S seconds "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--conflict-exit-code",
        type=int,
        default=EXIT_TEMPFAIL,
        metavar="N",
        help="exit status when the lock is held elsewhere, or (--slot) the occurrence "
        "was claimed or is past its grace (default: %(default)s)",
    )
    add_slot_options(parser)
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND [ARGS...]",
        help="what to run, after --; started directly, not through a shell",
    )
    parser.set_defaults(handler=run)


def child_status(returncode: int) -> int:
    """A shell-style exit status: the code itself, or 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _stderr(message: str) -> None:
    print(f"cronlock exec: {message}", file=sys.stderr, flush=True)


def _terminal_foreground() -> bool:
    """True when this process group is the foreground job of its terminal."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


class _Supervisor:
    """Starts the child, forwards signals to it, and watches the lock."""

    def __init__(
        self, command: list[str], grace: float, env: Optional[dict[str, str]] = None
    ) -> None:
        self.command = command
        self.grace = grace
        self.env = env
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.pending: list[int] = []
        self.skip_sigint = _terminal_foreground()

    def on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.proc is None:
            self.pending.append(signum)
        elif not (signum == signal.SIGINT and self.skip_sigint):
            self._send(signum)

    def _send(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)

    def run(self, lock: Any) -> int:
        """Run the child to its end; its status, or 76 if the lock was lost meanwhile."""
        try:
            self.proc = subprocess.Popen(self.command, env=self.env)
        except FileNotFoundError:
            _stderr(f"{self.command[0]}: command not found")
            return EXIT_NOT_FOUND
        except PermissionError:
            _stderr(f"{self.command[0]}: permission denied")
            return EXIT_NOT_EXECUTABLE
        except OSError as error:
            _stderr(f"{self.command[0]}: cannot execute: {error}")
            return EXIT_NOT_EXECUTABLE
        for signum in self.pending:
            self._send(signum)
        killed_at: Optional[float] = None
        while True:
            code = self.proc.poll()
            if code is not None:
                break
            if killed_at is None and lock.lost.is_set():
                _stderr(f"lock {lock.key!r} was lost; sending SIGTERM to {self.command[0]}")
                self._send(signal.SIGTERM)
                killed_at = time.monotonic()
            elif killed_at is not None and time.monotonic() - killed_at > self.grace:
                _stderr(f"{self.command[0]} still running {self.grace:g} s after SIGTERM; SIGKILL")
                self._send(signal.SIGKILL)
                killed_at = float("inf")
            if killed_at is None:
                lock.lost.wait(POLL_SECONDS)
            else:
                time.sleep(POLL_SECONDS)
        if killed_at is not None or lock.lost.is_set():
            return EXIT_LOCK_LOST
        return child_status(code)


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame: Optional[FrameType]) -> None:
    raise _Interrupted(signum)


def command_of(args: argparse.Namespace) -> list[str]:
    """The child's argv: everything after ``--`` (a leading ``--`` itself is dropped)."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CliError("no COMMAND given: cronlock exec --key K --ttl S -- COMMAND", EXIT_USAGE)
    return command


class _Refused(Exception):
    """With ``--slot``: this host does not run the occurrence (why is the message).

    ``code`` None exits with ``--conflict-exit-code``; a record cronlock did not write is
    an error (1), so that ``--conflict-exit-code 0`` cannot hide it.
    """

    def __init__(self, reason: str, code: Optional[int] = None) -> None:
        super().__init__(reason)
        self.code = code


def _checked_plan(args: argparse.Namespace, clock: SystemClock) -> Optional[SlotPlan]:
    """Check every option before anything is sent; the ``--slot`` plan, if any."""
    try:
        check_key(args.key, "--key")
        seconds_to_ms(args.ttl, "--ttl")
        if args.wait is not None:
            seconds_to_ms(args.wait, "--wait", allow_zero=True)
        return plan_of(args, int(clock.time() * 1000))
    except (ConfigurationError, TypeError) as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _due(plan: Optional[SlotPlan], clock: SystemClock) -> None:
    """Raise `_Refused` if the plan's occurrence is past its grace (or there is none)."""
    late = None if plan is None else plan.late(int(clock.time() * 1000))
    if late is not None:
        raise _Refused(late)


def _claim(plan: SlotPlan, store: Store, lock: LeaseLock, clock: SystemClock) -> None:
    """Claim the plan's occurrence under ``lock``, or raise `_Refused`."""
    _due(plan, clock)  # again: --wait may have taken long
    if isinstance(store, SqlClaimPath):
        assert plan.occurrence_ms is not None  # _due refused a plan without one
        said, detail = claim_occurrence(store, plan.key, lock.token, plan.occurrence_ms)
        word = SlotClaim(said)
    else:
        assert isinstance(store, RedisStore)
        word, detail = plan.claim(store.client, lock.token)
    refused = plan.refusal(word, detail)
    if refused is not None:
        raise _Refused(refused, EXIT_FAILURE if word is SlotClaim.CORRUPT else None)


def _not_run(refused: Exception, args: argparse.Namespace) -> tuple[int, str]:
    """The exit status and the reason for a command not run (lock held, --slot refused)."""
    if isinstance(refused, _Refused) and refused.code is not None:
        return refused.code, str(refused)
    if isinstance(refused, LockNotAcquired):
        return int(args.conflict_exit_code), f"lock {args.key!r} is held by another owner"
    return int(args.conflict_exit_code), str(refused)


def run(args: argparse.Namespace) -> int:
    """Acquire, run the child, release; see the module docstring for exit statuses."""
    command = command_of(args)
    clock = SystemClock()
    plan = _checked_plan(args, clock)
    store = open_store(args, socket_timeout=max(10.0, args.ttl))
    name = "Redis" if isinstance(store, RedisStore) else "the store"
    env = None if plan is None else {**os.environ, "CRONLOCK_SLOT": plan.occurrence}
    supervisor = _Supervisor(command, args.grace, env)
    previous = {s: signal.signal(s, _interrupt) for s in FORWARDED}
    status: Optional[int] = None
    try:
        _due(plan, clock)  # a late firing does not even ask for the lock
        lock = store_lock(store, args.key, args.ttl, wait=args.wait, renew=True)
        with lock:
            if plan is not None:
                _claim(plan, store, lock, clock)
            for s in FORWARDED:
                signal.signal(s, supervisor.on_signal)
            # Kept installed through the release: a late signal reaches a dead child (no-op).
            status = supervisor.run(lock)
    except (LockNotAcquired, _Refused) as refused:
        code, reason = _not_run(refused, args)
        _stderr(f"{reason}; not running {command[0]}")
        return code
    except LockLost:
        return EXIT_LOCK_LOST
    except _Interrupted as stop:
        _stderr(f"interrupted by signal {stop.signum} before {command[0]} started")
        return 128 + stop.signum
    except (redis.ConnectionError, redis.TimeoutError) as error:
        if status is None:
            _stderr(f"Redis unavailable, {command[0]} not run: {error}")
            return EXIT_UNAVAILABLE
        _stderr(f"could not release lock {args.key!r} (it lapses after --ttl): {error}")
    except store.errors as error:
        if status is None:
            _stderr(f"{name} error, {command[0]} not run: {type(error).__name__}: {error}")
            return EXIT_UNAVAILABLE
        _stderr(f"could not release lock {args.key!r} (it lapses after --ttl): {error}")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        close_store(store)
    assert status is not None
    return status
