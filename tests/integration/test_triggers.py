"""Triggers say what will happen: refused when paused, dropped once expired, and honest
about a fleet with no runner to take them (issue: operator edges, C8).

Redis keeps its own time, so expiry is tested with a request that expires in 1 ms
and a wait on Redis's clock until it has.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from cronlock import Admin, ConfigurationError, CronRunner, FakeClock, JobContext, TriggerRefused
from cronlock._keys import trigger_key
from cronlock.stores import Store
from cronlock.testing import wait_until

T0 = 1_800_000_000.0
PREFIX = "trg"


def replica(store: Any, runs: list[Any]) -> CronRunner:
    """A runner with one job, registered; each run appends its context."""
    runner = CronRunner(
        store, prefix=getattr(store, "prefix", PREFIX), clock=FakeClock(T0), default_ttl=5
    )

    @runner.interval(seconds=10, key="job")
    def job(ctx: JobContext) -> None:
        runs.append(ctx)

    runner.sync()
    return runner


def _queued(client: redis.Redis) -> list[str]:
    return [
        v.decode() if isinstance(v, bytes) else v
        for v in client.lrange(trigger_key(PREFIX, "job"), 0, -1)
    ]


def test_a_trigger_of_a_paused_job_is_refused_and_nothing_is_queued(store: Store) -> None:
    """TriggerRefused names the job; no request waits; force still queues and runs it."""
    runs: list[Any] = []
    r = replica(store, runs)
    admin = Admin(store)
    admin.pause("job")
    with pytest.raises(TriggerRefused, match="'job' is paused"):
        admin.trigger("job")
    assert admin.job("job").pending_triggers == 0
    assert admin.history("job", limit=5) == []
    request_id = admin.trigger("job", force=True)
    r.sync()
    assert [(ctx.kind, ctx.trigger_id) for ctx in runs] == [("manual", request_id)]


def test_a_request_nobody_took_in_time_is_dropped_as_expired(store: Store) -> None:
    """Forced or not, a request taken after its expiry does not run; history says expired."""
    runs: list[Any] = []
    r = replica(store, runs)
    admin = Admin(store)
    first = admin.trigger("job", expires=0.001)
    second = admin.trigger("job", force=True, expires=0.001)
    queued_by = store.time_ms()  # both deadlines are at most 1 ms after this
    wait_until(lambda: store.time_ms() > queued_by + 1, timeout=5)
    r.sync()
    assert runs == []
    entries = admin.history("job", limit=5)
    assert [(e.event, e.reason, e.trigger_id) for e in entries] == [
        ("skipped", "expired", second),
        ("skipped", "expired", first),
    ]
    assert admin.job("job").pending_triggers == 0


def test_requests_expire_after_ten_minutes_by_default(client: redis.Redis) -> None:
    """The stored expiry is the store's clock plus DEFAULT_TRIGGER_EXPIRES_S; it runs before."""
    from cronlock.admin import Admin as PublicAdmin
    from cronlock.ops.admin import DEFAULT_TRIGGER_EXPIRES_S

    runs: list[Any] = []
    r = replica(client, runs)
    admin = PublicAdmin(client, PREFIX)
    before = admin.store.time_ms()
    admin.trigger("job")
    [request] = _queued(client)
    expires_ms = int(request.rsplit("|", 1)[1])
    assert DEFAULT_TRIGGER_EXPIRES_S == 600.0
    assert before + 600_000 <= expires_ms <= admin.store.time_ms() + 600_000
    r.sync()
    assert len(runs) == 1


def test_a_request_of_an_older_version_without_expiry_still_runs(client: redis.Redis) -> None:
    """ "id|force|requested_ms|requested_by" (no expiry field) is taken as before."""
    runs: list[Any] = []
    r = replica(client, runs)
    client.rpush(trigger_key(PREFIX, "job"), "abc123|0|1800000000000|old-host:1")
    client.sadd(f"{PREFIX}:triggers", "job")
    r.sync()
    assert [ctx.trigger_id for ctx in runs] == ["abc123"]


@pytest.mark.parametrize(
    ("expires", "error"),
    [(0, ConfigurationError), (-5, ConfigurationError), ("10m", TypeError), (True, TypeError)],
)
def test_a_bad_expiry_is_refused_before_anything_is_written(
    store: Store, expires: Any, error: type[Exception]
) -> None:
    """The message names expires; no request is queued."""
    replica(store, [])
    admin = Admin(store)
    with pytest.raises(error, match="expires"):
        admin.trigger("job", expires=expires)
    assert admin.job("job").pending_triggers == 0


def test_runners_with_counts_the_live_runners_that_have_a_job(client: redis.Redis) -> None:
    """0 before any runner's heartbeat, 1 while one runs, 0 again once it stopped."""
    admin = Admin(client, PREFIX)
    r = CronRunner(client, prefix=PREFIX, clock=FakeClock(T0))

    @r.interval(seconds=10, key="job")
    def job() -> None:
        pass

    assert admin.runners_with("job") == 0
    r.start()  # its operations thread writes the registry and the heartbeat at once
    try:
        wait_until(lambda: admin.runners_with("job") == 1)
        assert admin.runners_with("other") == 0
        assert admin.job("job").last_seen is not None
    finally:
        r.stop(timeout=5)  # removes its heartbeat
    assert admin.runners_with("job") == 0
