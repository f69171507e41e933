"""``wait_replicas``: a claim runs only once enough replicas have it (Redis ``WAIT``), and
a finish waits for them too (one that they did not acknowledge is logged and counted).

Each test starts a master and a replica of its own; the runner is stepped with
``run_pending`` on a fake clock. A replica stopped with SIGSTOP never acknowledges, which
is how a claim that has not reached the replicas is made on purpose.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from cronlock import CronRunner, FakeClock, IntervalSchedule, NotReplicated
from cronlock._keys import job_key
from cronlock.context import ErrorContext, JobContext
from cronlock.stores.types import FinishInfo, Replication, Retention, SlotClaim
from cronlock.testing import RedisServer
from tests.stores import sqlite_store

T0 = 1_800_000_000.0
PREFIX = "wr"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[RedisServer, RedisServer]]:
    """A master and one replica, shared by this module's tests."""
    master = RedisServer(extra_args=("--repl-diskless-sync-delay", "0")).start()
    replica = RedisServer(extra_args=("--replicaof", master.host, str(master.port))).start()
    try:
        deadline = time.monotonic() + 15
        with replica.client(decode_responses=True) as c:
            while c.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "replica did not sync"
                time.sleep(0.05)
        yield master, replica
    finally:
        replica.stop()
        master.stop()


@pytest.fixture
def pair(servers: tuple[RedisServer, RedisServer]) -> Iterator[tuple[RedisServer, RedisServer]]:
    """The shared master and replica, emptied, the replica running again afterwards."""
    master, replica = servers
    master.client().flushall()
    yield master, replica
    replica.resume()


def _runner(
    client: redis.Redis, clock: FakeClock, runs: list[Any], errors: list[Any], **kw: Any
) -> CronRunner:
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=clock,
        default_ttl=5,
        on_error=lambda e, c: errors.append((e, c)),
        **kw,
    )
    runner.add_job(
        lambda ctx: runs.append((ctx.slot_ms, ctx.attempt)),
        IntervalSchedule(10),
        key="job",
        catch_up=3,
    )
    return runner


def test_a_claim_the_replica_has_runs(pair: tuple[RedisServer, RedisServer]) -> None:
    """With the replica up, a won claim waits for it and runs; nothing is reported."""
    master, replica = pair
    runs: list[Any] = []
    errors: list[Any] = []
    clock = FakeClock(T0 + 0.001)
    runner = _runner(master.client(), clock, runs, errors, wait_replicas=1, wait_timeout=2)
    assert runner.run_pending() == 1
    assert runs == [(int(T0 * 1000), 1)]
    assert errors == []
    assert runner.statistics().claims_unreplicated == 0
    state = replica.client(decode_responses=True).hgetall(job_key(PREFIX, "job"))
    assert state["slot"] == str(int(T0 * 1000))  # the replica had it before the run began


def test_a_claim_no_replica_acknowledges_is_not_run_and_is_handed_back(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    """Replica frozen: the won claim is not run, NotReplicated goes to on_error, and the
    slot is handed back, so a claim that reaches the replica later runs it as attempt 2."""
    master, replica = pair
    runs: list[Any] = []
    errors: list[tuple[BaseException, ErrorContext]] = []
    clock = FakeClock(T0 + 0.001)
    runner = _runner(master.client(), clock, runs, errors, wait_replicas=1, wait_timeout=0.2)
    replica.pause()
    started = time.monotonic()
    assert runner.run_pending() == 0
    assert time.monotonic() - started >= 0.2  # it did wait for the replica
    assert runs == []
    [(error, context)] = errors
    assert isinstance(error, NotReplicated)
    assert "'job'" in str(error)
    assert "wait_replicas is 1" in str(error)
    assert (context.key, context.phase, context.attempt) == ("job", "acquire", 1)
    assert runner.statistics().claims_unreplicated == 1
    assert runner.statistics().finishes_unreplicated == 0  # the give-back does not wait
    state = master.client(decode_responses=True).hgetall(job_key(PREFIX, "job"))
    assert state["status"] != "running" or int(state["lease"]) <= _server_ms(master)

    replica.resume()
    other_runs: list[Any] = []
    other = _runner(master.client(), FakeClock(T0 + 0.5), other_runs, [], wait_replicas=1)
    assert other.run_pending() == 1
    assert other_runs == [(int(T0 * 1000), 2)]


def test_without_a_replica_every_won_claim_is_held_back(redis_server: RedisServer) -> None:
    """A master with no replica at all: fail closed, nothing runs (several jobs at once)."""
    server = redis_server
    server.client().flushall()
    runs: list[Any] = []
    errors: list[Any] = []
    runner = _runner(
        server.client(), FakeClock(T0 + 0.001), runs, errors, wait_replicas=1, wait_timeout=0.05
    )
    runner.add_job(lambda: runs.append("second"), IntervalSchedule(10), key="second", catch_up=3)
    assert runner.run_pending() == 0
    assert runs == []
    assert sorted(c.key for _, c in errors) == ["job", "second"]
    assert all(isinstance(e, NotReplicated) for e, _ in errors)


def test_the_wait_covers_claims_resent_after_noscript(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    """After SCRIPT FLUSH the claims are re-sent; the WAIT is re-sent after them."""
    master, _ = pair
    client = master.client()
    runs: list[Any] = []
    errors: list[Any] = []
    runner = _runner(client, FakeClock(T0 + 0.001), runs, errors, wait_replicas=1)
    runner.add_job(lambda: runs.append("second"), IntervalSchedule(10), key="second", catch_up=3)
    client.script_flush()
    assert runner.run_pending() == 2
    assert errors == []


@pytest.mark.parametrize("bad", [-1, True, 1.5, "1"])
def test_bad_wait_replicas_is_refused(redis_server: RedisServer, bad: Any) -> None:
    """wait_replicas must be a non-negative int; the message names the value."""
    with pytest.raises(ValueError, match=repr(bad).replace(".", r"\.")):
        CronRunner(redis_server.client(), wait_replicas=bad)


def _server_ms(server: RedisServer) -> int:
    seconds, micros = server.client().time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_a_wait_timeout_the_socket_timeout_would_cut_short_is_refused(
    redis_server: RedisServer,
) -> None:
    """The claim's reply waits for the WAIT, so the socket must wait longer."""
    client = redis_server.client(socket_timeout=0.5)
    with pytest.raises(ValueError, match=r"wait_timeout \(1 s\).*socket_timeout \(0\.5 s\)"):
        CronRunner(client, wait_replicas=1, wait_timeout=1)
    CronRunner(client, wait_replicas=1, wait_timeout=0.2)  # shorter: accepted


def _finish_runner(client: redis.Redis, handler: Any, **kw: Any) -> CronRunner:
    """A runner with one job whose handler is ``handler`` (claims wait for one replica)."""
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=FakeClock(T0 + 0.001),
        default_ttl=5,
        wait_replicas=1,
        **kw,
    )
    runner.add_job(handler, IntervalSchedule(10), key="job", catch_up=3)
    return runner


def test_a_finish_the_replica_has_when_run_pending_returns(
    pair: tuple[RedisServer, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    """The finish waits for the replica: read right after, the replica has it 'done'."""
    master, replica = pair
    caplog.set_level(logging.WARNING, logger="cronlock")
    runner = _finish_runner(master.client(), lambda: None, wait_timeout=2)
    assert runner.run_pending() == 1
    state = replica.client(decode_responses=True).hgetall(job_key(PREFIX, "job"))
    assert (state["slot"], state["status"]) == (str(int(T0 * 1000)), "done")
    assert runner.statistics().finishes_unreplicated == 0
    assert not [r for r in caplog.records if "replicas" in r.getMessage()]


def test_a_finish_no_replica_acknowledges_is_recorded_logged_and_counted(
    pair: tuple[RedisServer, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    """The replica freezes while the handler runs (after the claim reached it): the finish
    still completes on the master, a WARNING names the job, slot and counts, and
    ``finishes_unreplicated`` counts it."""
    master, replica = pair
    caplog.set_level(logging.WARNING, logger="cronlock")

    def freeze_the_replica(ctx: JobContext) -> None:
        replica.pause()

    runner = _finish_runner(master.client(), freeze_the_replica, wait_timeout=0.2)
    assert runner.run_pending() == 1
    stats = runner.statistics()
    assert (stats.runs_succeeded, stats.finishes_unreplicated) == (1, 1)
    state = master.client(decode_responses=True).hgetall(job_key(PREFIX, "job"))
    assert state["status"] == "done"
    [warning] = [r for r in caplog.records if "replicas within wait_timeout" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    message = warning.getMessage()
    assert "'job'" in message
    assert runner_slot(T0) in message
    assert "reached 0 of 1 replicas" in message
    assert "a failover now could run the slot again" in message


def runner_slot(epoch_s: float) -> str:
    """A slot as the runner's messages write it."""
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat()


def test_the_wait_covers_a_finish_resent_after_noscript(
    pair: tuple[RedisServer, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    """SCRIPT FLUSH while the handler runs: the finish is re-sent, and the WAIT after it."""
    master, replica = pair
    client = master.client()
    caplog.set_level(logging.WARNING, logger="cronlock")

    def flush_scripts() -> None:
        client.script_flush()

    runner = _finish_runner(client, flush_scripts, wait_timeout=2)
    assert runner.run_pending() == 1
    state = replica.client(decode_responses=True).hgetall(job_key(PREFIX, "job"))
    assert state["status"] == "done"
    assert runner.statistics().finishes_unreplicated == 0


def test_a_sql_store_accepts_and_ignores_a_finish_replication(tmp_path: Path) -> None:
    """A database's replication is its own: SQL stores take the argument and finish as ever."""
    store = sqlite_store(tmp_path, "wr")
    try:
        keep = Retention(10, 0)
        [won] = store.claim_slots([SlotClaim("a", 1_000, "me", 30_000, 3, "skip", "h:1:me", keep)])
        info = FinishInfo(attempt=1, fence=won.fence, holder="h:1:me", duration_ms=5)
        finished = store.finish(
            "a", 1_000, "me", "done", retention=keep, info=info, replication=Replication(1, 100)
        )
        assert finished is True
    finally:
        store.close()
