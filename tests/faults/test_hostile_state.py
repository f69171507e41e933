"""Data in Redis that is not ours, what an empty restart forgets, and Lua text hygiene.

These run the scheduler step by step (``run_pending`` with a fake clock) against the
session's private server: no sleeps, no processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from cronlock import CronRunner, JobContext
from cronlock._scripts import all_scripts
from cronlock.clock import FakeClock
from cronlock.context import ErrorContext
from cronlock.errors import CorruptStateError
from cronlock.schedules import IntervalSchedule
from cronlock.testing import RedisServer

SLOT = 1_700_000_040.0  # a multiple of 60 s


@pytest.fixture
def db(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client(socket_timeout=5)
    client.flushdb()
    yield client
    client.close()


def _runner(
    client: Any, keys: list[str], ran: list[str], errors: list[Any], at: float = SLOT + 1
) -> CronRunner:
    runner = CronRunner(
        client, prefix="p", clock=FakeClock(at), on_error=lambda e, c: errors.append((e, c))
    )
    for key in keys:

        def handler(ctx: JobContext) -> None:
            ran.append(ctx.key)

        runner.add_job(handler, IntervalSchedule(60), key=key, catch_up=30)
    return runner


@pytest.mark.parametrize(
    "garbage",
    [
        ("set", "p:job:{a}", "hello"),
        ("rpush", "p:job:{a}", "x"),
        ("hset", "p:job:{a}", "slot", "not-a-number"),
    ],
    ids=["string", "list", "hash-bad-slot"],
)
def test_foreign_data_at_a_job_key_fails_that_job_only(
    db: redis.Redis, garbage: tuple[str, ...]
) -> None:
    """A wrong-type key or a corrupted state hash: job a gets a clear CorruptStateError via
    on_error (phase acquire, key named); job b on the same runner still runs."""
    db.execute_command(*garbage)
    ran: list[str] = []
    errors: list[tuple[BaseException, ErrorContext]] = []
    _runner(db, ["a", "b"], ran, errors).run_pending()
    assert ran == ["b"]
    assert len(errors) == 1
    error, context = errors[0]
    assert isinstance(error, CorruptStateError)
    assert "p:job:{a}" in str(error)
    assert (context.key, context.phase) == ("a", "acquire")


def test_keys_and_arguments_never_enter_lua_text(db: redis.Redis) -> None:
    """Jobs with quotes, Lua brackets, unicode and 256-char keys run, and the server holds
    only the scripts cronlock ships: nothing user-supplied became script source."""
    db.script_flush()
    keys = ["k 1", "quote'\"", "lua]]--", "end) os.exit(", "ünïcode·键", "a:b:c", "x" * 256]
    ran: list[str] = []
    errors: list[Any] = []
    runner = _runner(db, keys, ran, errors)
    runner.run_pending()
    assert sorted(ran) == sorted(keys)
    assert errors == []
    shipped = [s.sha for s in all_scripts()]
    loaded = sum(db.script_exists(*shipped))
    cached = int(db.info("memory").get("number_of_cached_scripts", loaded))
    assert cached == loaded  # every cached script is one of ours
    assert loaded >= 1


def test_an_empty_restart_forgets_done_slots_within_catch_up(db: redis.Redis) -> None:
    """Documented limit: a slot finished before Redis lost its data (empty restart, failover
    without the write) runs again on a replica that (re)starts within catch-up of it; with
    the state kept, the same replica finds the slot done."""
    ran: list[str] = []
    errors: list[Any] = []
    _runner(db, ["nightly"], ran, errors).run_pending()
    assert ran == ["nightly"]
    _runner(db, ["nightly"], ran, errors, at=SLOT + 5).run_pending()
    assert ran == ["nightly"], "state kept: the slot is done, a late replica skips it"
    db.flushall()  # what an empty restart leaves
    _runner(db, ["nightly"], ran, errors, at=SLOT + 10).run_pending()
    assert ran == ["nightly", "nightly"], "state lost: the slot ran a second time"
    assert errors == []
