"""The runner's threads, job handles and registration checks, against a real server."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis

from cronlock import ConfigurationError, CronRunner, FakeClock, JobContext, OffsetClock
from cronlock._keys import job_key
from cronlock.testing import wait_until

T0 = 1_800_000_000.0


def test_start_returns_at_once_and_stop_ends_the_scheduler_thread(client: redis.Redis) -> None:
    """start() returns immediately with a daemon thread; stop() ends it."""
    runner = CronRunner(client, prefix="lc")
    runner.interval(seconds=3600, key="idle")(lambda: None)
    runner.start()
    assert runner.running
    names = {t.name for t in threading.enumerate()}
    assert "cronlock-scheduler" in names
    runner.stop(timeout=5)
    assert not runner.running


def test_two_threaded_runners_share_each_slot(client: redis.Redis) -> None:
    """Two runners on real threads and a 0.2 s grid: no slot runs twice."""
    runs: list[tuple[int, str]] = []
    lock = threading.Lock()
    runners = []
    for name in ("a", "b"):
        runner = CronRunner(client, prefix="lc")

        def handler(ctx: JobContext, name: str = name) -> None:
            with lock:
                runs.append((ctx.slot_ms, name))

        runner.add_job(handler, _interval(0.2), key="fast", catch_up=0.1)
        runners.append(runner.start())
    try:
        wait_until(lambda: len(runs) >= 8, timeout=10)
    finally:
        for runner in runners:
            runner.stop(timeout=5)
    slots = [s for s, _ in runs]
    assert len(slots) == len(set(slots))
    assert all(s % 200 == 0 for s in slots)


def _interval(seconds: float) -> Any:
    from cronlock import IntervalSchedule

    return IntervalSchedule(seconds)


def test_stop_cancels_a_running_handler_and_hands_the_slot_over(client: redis.Redis) -> None:
    """stop() sets ctx.cancelled; a handler that gives up leaves the slot for takeover at once."""
    started = threading.Event()
    seen: list[JobContext] = []
    runner = CronRunner(client, prefix="lc", clock=OffsetClock(0))

    @runner.interval(seconds=3600, key="long", ttl=60, catch_up=3600)
    def long_job(ctx: JobContext) -> None:
        seen.append(ctx)
        started.set()
        ctx.cancelled.wait(30)
        ctx.check()

    runner.start()
    assert started.wait(10)
    runner.stop(timeout=5)
    assert seen[0].cancelled.is_set()
    state = client.hgetall(job_key("lc", "long"))
    state = {_s(k): _s(v) for k, v in state.items()}
    assert state["status"] == "running"
    now_s, now_us = client.time()
    assert int(state["lease"]) <= now_s * 1000 + now_us // 1000  # lease ended: no 60 s wait
    other = CronRunner(client, prefix="lc", clock=OffsetClock(0))
    attempts: list[int] = []
    other.interval(seconds=3600, key="long", ttl=60, catch_up=3600)(
        lambda ctx: attempts.append(ctx.attempt)
    )
    other.run_pending()
    assert attempts == [2]


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def test_stop_after_timeout_hands_over_a_handler_that_ignores_cancellation(
    client: redis.Redis,
) -> None:
    """A handler still busy after stop's timeout has its lease ended anyway."""
    release = threading.Event()
    started = threading.Event()
    runner = CronRunner(client, prefix="lc")

    @runner.interval(seconds=3600, key="stubborn", ttl=60, catch_up=3600)
    def stubborn() -> None:
        started.set()
        release.wait(30)

    runner.start()
    assert started.wait(10)
    runner.stop(timeout=0.2)
    try:
        lease = int(_s(client.hget(job_key("lc", "stubborn"), "lease")))
        now_s, now_us = client.time()
        assert lease <= now_s * 1000 + now_us // 1000
    finally:
        release.set()


def test_job_handles_stop_start_destroy_and_next_run(client: redis.Redis) -> None:
    """A job handle stops and restarts scheduling, reports next_run, and frees its key."""
    clock = FakeClock(T0 + 1)
    runner = CronRunner(client, prefix="lc", clock=clock)
    ran: list[int] = []
    job = runner.add_job(lambda ctx: ran.append(ctx.slot_ms), _interval(10), key="h", catch_up=0)
    assert runner.job("h") is job
    runner.run_pending()
    assert job.next_run == datetime.fromtimestamp(T0 + 10, timezone.utc)
    job.stop()
    assert job.next_run is None
    clock.set(T0 + 10.001)
    runner.run_pending()
    assert ran == []
    job.start()
    clock.set(T0 + 20.001)
    runner.run_pending()
    assert ran == [int((T0 + 20) * 1000)]
    job.destroy()
    with pytest.raises(KeyError):
        runner.job("h")
    runner.add_job(lambda: None, _interval(10), key="h")  # the key is free again


def test_decorators_return_the_function_unchanged(client: redis.Redis) -> None:
    """@runner.cron / .interval / .at return the original function, still callable."""
    runner = CronRunner(client, prefix="lc")

    def f() -> int:
        return 42

    assert runner.cron("*/5 * * * *", key="c")(f) is f
    assert runner.interval(minutes=1, key="i")(f) is f
    assert runner.at(datetime(2100, 1, 1, tzinfo=timezone.utc), key="o")(f) is f
    assert f() == 42


def test_key_defaults_to_module_and_qualname(client: redis.Redis) -> None:
    """Without key=, a job is keyed by the function's module.qualname."""
    runner = CronRunner(client, prefix="lc")

    @runner.interval(seconds=10)
    def my_job() -> None: ...

    keys = [j.key for j in runner.jobs]
    assert keys == [f"{__name__}.test_key_defaults_to_module_and_qualname.<locals>.my_job"]


def test_every_dsl_registers_a_grid_aligned_job(client: redis.Redis) -> None:
    """runner.every(10).seconds.do(fn, arg) runs fn(arg) on the shared 10 s grid."""
    clock = FakeClock(T0 + 0.5)
    runner = CronRunner(client, prefix="lc", clock=clock)
    got: list[str] = []
    job = runner.every(10).seconds.do(got.append, "hello")
    runner.run_pending()
    assert got == ["hello"]
    assert job.next_run == datetime.fromtimestamp(T0 + 10, timezone.utc)


def test_a_one_off_runs_once_cluster_wide(client: redis.Redis) -> None:
    """runner.at(...) runs once across replicas and then has no next run."""
    when = datetime.fromtimestamp(T0, timezone.utc)
    runs: list[str] = []
    runners = []
    for name in ("a", "b"):
        r = CronRunner(client, prefix="lc", clock=FakeClock(T0 + 0.01))
        r.at(when.isoformat(), key="once")(lambda name=name: runs.append(name))
        runners.append(r)
    for r in runners:
        r.run_pending()
    assert len(runs) == 1
    assert runners[0].job("once").next_run is None


BAD_REGISTRATIONS = [
    ("cron-expression", lambda r: r.cron("61 * * * *", key="x"), "61 * * * *"),
    ("cron-garbage", lambda r: r.cron("every minute", key="x"), "every minute"),
    ("timezone", lambda r: r.cron("* * * * *", key="x", timezone="Mars/Olympus"), "Mars/Olympus"),
    ("ttl-zero", lambda r: r.interval(seconds=10, key="x", ttl=0)(lambda: None), "ttl"),
    ("ttl-negative", lambda r: r.interval(seconds=10, key="x", ttl=-1)(lambda: None), "-1"),
    ("ttl-nan", lambda r: r.interval(seconds=10, key="x", ttl=float("nan"))(lambda: None), "nan"),
    ("interval-zero", lambda r: r.interval(seconds=0, key="x"), "seconds=0"),
    ("unknown-option", lambda r: r.interval(seconds=10, key="x", retires=3), "retires"),
    ("overlap", lambda r: r.interval(seconds=10, key="x", overlap="queue")(lambda: None), "queue"),
    ("max-attempts", lambda r: r.interval(seconds=10, key="x", max_attempts=0)(lambda: None), "0"),
    ("key-braces", lambda r: r.interval(seconds=10, key="a{b}")(lambda: None), "a{b}"),
    ("key-newline", lambda r: r.interval(seconds=10, key="a\nb")(lambda: None), "a\\nb"),
    ("key-empty", lambda r: r.interval(seconds=10, key="")(lambda: None), "''"),
    ("key-huge", lambda r: r.interval(seconds=10, key="k" * 10_000)(lambda: None), "10000"),
    ("handler", lambda r: r.add_job("not callable", _interval(10), key="x"), "not callable"),
    ("handler-arity", lambda r: r.add_job(lambda a, b: None, _interval(10), key="x"), "requires 2"),
    ("schedule-type", lambda r: r.add_job(lambda: None, "*/5 * * * *", key="x"), "*/5 * * * *"),
    ("dst-fold", lambda r: r.cron("0 2 * * *", key="x", dst_fold="twice"), "twice"),
    ("every-to", lambda r: r.every(5).to(10).seconds.do(lambda: None), "to"),
]


@pytest.mark.parametrize(
    ("case", "register", "named"), BAD_REGISTRATIONS, ids=[c[0] for c in BAD_REGISTRATIONS]
)
def test_bad_registration_is_refused_naming_the_value(
    client: redis.Redis, case: str, register: Any, named: str
) -> None:
    """Each bad registration raises ConfigurationError naming the value; nothing is written."""
    runner = CronRunner(client, prefix="lc")
    with pytest.raises((ConfigurationError, TypeError)) as info:
        register(runner)
    assert named in str(info.value)
    assert runner.jobs == []
    assert client.dbsize() == 0


def test_duplicate_key_is_refused(client: redis.Redis) -> None:
    """Two jobs with one key in one runner is a configuration error naming the key."""
    runner = CronRunner(client, prefix="lc")
    runner.interval(seconds=10, key="dup")(lambda: None)
    with pytest.raises(ConfigurationError, match="'dup'"):
        runner.interval(seconds=20, key="dup")(lambda: None)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"prefix": "a b{"}, "a b{"),
        ({"default_ttl": 0}, "default_ttl"),
        ({"max_workers": 0}, "max_workers"),
        ({"after_fork": "explode"}, "explode"),
        ({"on_error": 42}, "42"),
        ({"clock": "yesterday"}, "yesterday"),
    ],
    ids=["prefix", "default_ttl", "max_workers", "after_fork", "on_error", "clock"],
)
def test_bad_runner_options_are_refused(
    client: redis.Redis, kwargs: dict[str, Any], named: str
) -> None:
    """CronRunner refuses bad options with a message naming the value."""
    with pytest.raises((ConfigurationError, TypeError), match=named.replace("{", r"\{")):
        CronRunner(client, **kwargs)


def test_runner_refuses_something_that_is_not_a_redis_client() -> None:
    """A client that is not redis-py's is a TypeError naming it."""
    with pytest.raises(TypeError, match="not-a-client"):
        CronRunner("not-a-client")  # type: ignore[arg-type]


def test_timedelta_ttl_is_accepted(client: redis.Redis) -> None:
    """ttl may be a timedelta, kept to the millisecond."""
    runner = CronRunner(client, prefix="lc")
    job = runner.add_job(lambda: None, _interval(10), key="td", ttl=timedelta(milliseconds=1500))
    assert job.options.ttl_ms == 1500


def test_hashed_cron_fields_use_the_default_key(client: redis.Redis) -> None:
    """An H expression without key= hashes on module.qualname: same minute in every replica."""
    minutes = set()
    for _ in range(2):
        runner = CronRunner(client, prefix="lc")

        @runner.cron("H * * * *")
        def hashed() -> None: ...

        (job,) = runner.jobs
        minutes.add(job.schedule.next_after(0))
    assert len(minutes) == 1


def test_every_tags_are_kept_on_the_job(client: redis.Redis) -> None:
    """Tags given with .tag() are kept on the job handle."""
    runner = CronRunner(client, prefix="lc")
    job = runner.every(5).minutes.tag("reports", "daily").do(lambda: None)
    assert job.tags == {"reports", "daily"}


def test_a_stopping_replica_announces_its_handover_and_another_takes_the_slot_at_once(
    client: redis.Redis,
) -> None:
    """stop() hands the slot over and says so: a listening replica runs it as attempt 2.

    The lease is 60 s; without the announcement the other replica would look again only
    when the lease it last saw lapsed.
    """
    started = threading.Event()
    release = threading.Event()
    taken: list[int] = []
    first = CronRunner(client, prefix="ho")
    second = CronRunner(client, prefix="ho")

    @first.interval(seconds=3600, key="long", ttl=60, catch_up=3600)
    def slow(ctx: JobContext) -> None:
        started.set()
        release.wait(30)

    @second.interval(seconds=3600, key="long", ttl=60, catch_up=3600)
    def successor(ctx: JobContext) -> None:
        taken.append(ctx.attempt)

    first.start()
    assert started.wait(10)
    second.start()
    try:
        wait_until(lambda: second._ops is not None and second._ops.listening, timeout=10)
        first.stop(timeout=0.2)  # the handler ignores cancellation: its slot is handed over
        wait_until(lambda: taken, timeout=10)
    finally:
        release.set()
        second.stop(timeout=5)
    assert taken == [2]
