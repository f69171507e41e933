"""The audit log records every state of a run: started, ended, taken over, abandoned.

Real runs of a real runner against the real PostgreSQL of ``tests/pg.py``; an attempt
whose process "died" is a claim made straight through the store with a short lease
that nobody renews, and whose lapse is awaited on Redis's own clock.
"""

from __future__ import annotations

import secrets
from typing import Any, cast

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock, JobContext
from cronlock.clock import utc_now
from cronlock.stores import RedisStore
from cronlock.stores.types import ClaimStatus, Retention, SlotClaim
from cronlock.testing import free_port, wait_until
from tests import pg

psycopg = pytest.importorskip("psycopg")
from cronlock.postgres import PostgresHistory  # noqa: E402

T0 = 1_800_000_000.0  # a multiple of 10 s
SLOT_MS = int(T0 * 1000)
PREFIX = "pga"


def _history(made: list[Any], schema: str, **kw: Any) -> PostgresHistory:
    return cast(PostgresHistory, pg.history(made, pg.DSN, schema, **kw))


def _runner(client: redis.Redis, history: PostgresHistory, **job: Any) -> CronRunner:
    runner = CronRunner(
        client,
        prefix=PREFIX,
        clock=FakeClock(T0 - 1),
        default_ttl=5,
        observers=[history],
        on_error=lambda error, context: None,
    )

    @runner.interval(seconds=10, key="sync", **job)
    def sync(ctx: JobContext) -> None:
        pass

    return runner


def _dead_attempt(client: redis.Redis, max_attempts: int = 3) -> tuple[int, int]:
    """Claim slot T0 of ``sync`` as a process that then dies: (fence, lease end)."""
    store = RedisStore(client, PREFIX)
    claim = SlotClaim(
        "sync", SLOT_MS, secrets.token_hex(8), 150, max_attempts, "skip", "dead:1:x", Retention()
    )
    [reply] = store.claim_slots([claim])
    assert not isinstance(reply, BaseException)
    assert reply.status == ClaimStatus.WON
    wait_until(lambda: store.time_ms() > reply.lease_until_ms, timeout=5)
    return reply.fence, reply.lease_until_ms


def _run_slot(runner: CronRunner) -> int:
    runner.clock.set(T0 + 0.001)  # type: ignore[attr-defined]
    return runner.run_pending()


def test_a_run_has_a_running_row_while_it_runs(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """The row is written when the run starts (status running, no end), then completed."""
    history = _history(histories, schema)
    runner = CronRunner(client, prefix=PREFIX, clock=FakeClock(T0 - 1), observers=[history])
    seen: list[dict[str, Any]] = []

    @runner.interval(seconds=10, key="slow")
    def slow(ctx: JobContext) -> None:
        seen.extend(wait_until(lambda: pg.table_rows(schema) if _exists(schema) else None))

    assert _run_slot(runner) == 1
    [during] = seen
    assert during["status"] == "running"
    assert during["finished_at"] is None
    assert during["duration"] is None
    assert during["started_at"] is not None
    assert during["kind"] == "scheduled"
    assert history.close(timeout=30)
    [after] = pg.table_rows(schema)
    assert after["run_id"] == during["run_id"]
    assert after["status"] == "succeeded"
    assert after["finished_at"] >= after["started_at"]


def _exists(schema: str) -> bool:
    with psycopg.connect(pg.DSN) as conn:
        row = conn.execute("SELECT to_regclass(%s)", [f'"{schema}".cronlock_runs']).fetchone()
        return row is not None and row[0] is not None


def test_a_triggered_run_is_recorded_as_manual_with_its_trigger_id(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """kind manual and trigger_id the request's id, in the row and in read()."""
    history = _history(histories, schema)
    runner = _runner(client, history)
    runner.sync()  # registers the job
    request_id = Admin(client, prefix=PREFIX).trigger("sync")
    runner.sync()  # takes and runs the trigger
    assert history.close(timeout=30)
    [row] = pg.table_rows(schema)
    assert (row["kind"], row["trigger_id"], row["status"]) == ("manual", request_id, "succeeded")
    [record] = history.read(job="sync")
    assert (record.kind, record.trigger_id) == ("manual", request_id)


def test_a_takeover_ends_the_row_the_dead_attempt_wrote(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """Attempt 1's running row becomes taken_over; attempt 2 is kind takeover."""
    fence, _ = _dead_attempt(client)
    dead = _history(histories, schema)  # what the dead process wrote before it died
    dead.run_started(JobContext("sync", SLOT_MS, 1, fence, runner_id="x"), utc_now())
    assert dead.close(timeout=30)
    history = _history(histories, schema)
    assert _run_slot(_runner(client, history)) == 1
    assert history.close(timeout=30)
    first, second = pg.table_rows(schema)
    assert (first["attempt"], first["status"], first["runner_id"]) == (1, "taken_over", "x")
    assert first["finished_at"] is not None
    assert (second["attempt"], second["status"], second["kind"]) == (2, "succeeded", "takeover")
    assert [r.attempt for r in history.read()] == [2]  # read(): runs their owner ended
    assert [r.status for r in history.rows()] == ["succeeded", "taken_over"]


def test_a_takeover_writes_a_row_for_an_attempt_that_died_before_writing_one(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """No row for attempt 1 (its process died within the flush window): one is written."""
    _dead_attempt(client)
    history = _history(histories, schema)
    assert _run_slot(_runner(client, history)) == 1
    assert history.close(timeout=30)
    first, second = pg.table_rows(schema)
    assert (first["attempt"], first["status"], first["kind"]) == (1, "taken_over", "scheduled")
    assert first["owner"] is None
    assert first["started_at"] is None
    assert second["attempt"] == 2


def test_a_slot_abandoned_after_max_attempts_ends_its_last_row(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """max_attempts reached: the dead attempt's row becomes abandoned, nothing else runs."""
    fence, _ = _dead_attempt(client, max_attempts=1)
    dead = _history(histories, schema)
    dead.run_started(JobContext("sync", SLOT_MS, 1, fence, runner_id="x"), utc_now())
    assert dead.close(timeout=30)
    history = _history(histories, schema)
    assert _run_slot(_runner(client, history, max_attempts=1)) == 0
    assert history.close(timeout=30)
    [row] = pg.table_rows(schema)
    assert (row["attempt"], row["status"], row["runner_id"]) == (1, "abandoned", "x")
    assert row["finished_at"] is not None


def test_an_abandoned_slot_without_a_row_gets_one(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """The abandoned slot's row is written even when its attempt left none."""
    _dead_attempt(client, max_attempts=1)
    history = _history(histories, schema)
    assert _run_slot(_runner(client, history, max_attempts=1)) == 0
    assert history.close(timeout=30)
    [row] = pg.table_rows(schema)
    assert (row["status"], row["attempt"], row["slot"].timestamp()) == ("abandoned", None, T0)


def test_a_table_of_an_older_version_is_upgraded_in_place(
    client: redis.Redis, schema: str, histories: list[Any]
) -> None:
    """Old rows stay; the new columns appear; a running row fits (NOT NULL dropped)."""
    with psycopg.connect(pg.DSN) as conn:
        conn.execute(
            f'CREATE TABLE "{schema}".cronlock_runs (id bigserial PRIMARY KEY, '
            "job text NOT NULL, slot timestamptz NOT NULL, attempt integer NOT NULL, "
            "fencing_token bigint NOT NULL, owner text NOT NULL, runner_id text NOT NULL, "
            "status text NOT NULL, started_at timestamptz NOT NULL, "
            "finished_at timestamptz NOT NULL, duration double precision NOT NULL, "
            "error_type text, traceback text)"
        )
        conn.execute(
            f'INSERT INTO "{schema}".cronlock_runs (job, slot, attempt, fencing_token, owner, '
            "runner_id, status, started_at, finished_at, duration) VALUES ('old', now(), 1, 1, "
            "'h:1:r', 'r', 'succeeded', now(), now(), 0)"
        )
    history = _history(histories, schema)
    assert _run_slot(_runner(client, history)) == 1
    assert history.close(timeout=30)
    rows = {r["job"]: r for r in pg.table_rows(schema)}
    assert (rows["old"]["kind"], rows["old"]["status"]) == (None, "succeeded")
    assert (rows["sync"]["kind"], rows["sync"]["status"]) == ("scheduled", "succeeded")


def test_probe_says_whether_postgres_answers(schema: str, histories: list[Any]) -> None:
    """probe(): ok with a latency on the real server; the error named on a closed port."""
    good = _history(histories, schema).probe()
    assert good.ok
    assert good.latency_ms is not None
    assert good.error == ""
    params = psycopg.conninfo.conninfo_to_dict(pg.DSN)
    params.update(host="127.0.0.1", port=str(free_port()))
    closed = psycopg.conninfo.make_conninfo(**params)
    bad = cast(PostgresHistory, pg.history(histories, closed, schema)).probe()
    assert not bad.ok
    assert bad.latency_ms is None
    assert "OperationalError" in bad.error
    assert bad.as_dict()["error"] == bad.error


@pytest.mark.parametrize("reachable", [True, False], ids=["up", "down"])
def test_health_checks_the_postgres_history_connection(
    redis_url: str, schema: str, histories: list[Any], reachable: bool
) -> None:
    """/health reports the audit log's connection; a down one is a warning, still 200."""
    flask = pytest.importorskip("flask")
    from cronlock.flask import CronLock

    dsn = pg.DSN
    if not reachable:
        params = psycopg.conninfo.conninfo_to_dict(pg.DSN)
        params.update(host="127.0.0.1", port=str(free_port()))
        dsn = psycopg.conninfo.make_conninfo(**params)
    history = cast(PostgresHistory, pg.history(histories, dsn, schema))
    ext = CronLock(observers=[history])
    app = flask.Flask("pghealth")
    app.config.update(CRONLOCK_REDIS_URL=redis_url, CRONLOCK_PREFIX=PREFIX)
    ext.init_app(app)
    app.register_blueprint(ext.blueprint(authorize=lambda action: True))
    runner = ext.runner_for(app)
    ext.start(app)
    try:
        http = app.test_client()
        response = wait_until(
            lambda: (r := http.get("/cronlock/health")).status_code == 200 and r, timeout=15
        )
        report = response.get_json()
        [probe] = report["observers"]
        assert probe["name"] == f"{schema}.cronlock_runs"
        assert probe["ok"] is reachable
        warned = [w for w in report["warnings"] if "cronlock_runs unreachable" in w]
        assert len(warned) == (0 if reachable else 1)
    finally:
        runner.stop(timeout=5)
