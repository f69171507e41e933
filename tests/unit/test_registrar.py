"""One registrar, one option table: the runner, the Flask extension, dynamic schedules and
the CLI accept the same options, start from the same defaults and refuse the same values
with the same message (no Redis: nothing here is started or claimed)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Callable

import pytest
import redis

from cronlock import ConfigurationError, CronRunner
from cronlock.cli import build_parser
from cronlock.job import Job
from cronlock.ops.schedules import SCHEDULE_OPTIONS, ScheduleSpec
from cronlock.options import (
    DYNAMIC_OPTIONS,
    OPTION_NAMES,
    OPTIONS,
    RUNNER_DEFAULTS,
    JobOptions,
    parse_options,
)
from cronlock.registrar import JobSpec, Registrar
from cronlock.schedules import IntervalSchedule

flask = pytest.importorskip("flask")

from cronlock.flask import DEFAULTS, CronLock  # noqa: E402

SCHEDULE = IntervalSchedule(60)

#: A valid value of every option but `key`.
GOOD: dict[str, Any] = {
    "ttl": 12.5,
    "heartbeat": 2,
    "max_attempts": 5,
    "overlap": "allow",
    "catch_up": timedelta(seconds=7),
    "jitter": 0.25,
    "retries": 2,
    "retry_backoff": 0,
    "timeout": 30,
    "payload": {"x": 1},
}

#: Bad values, each refused by every host.
BAD: list[tuple[str, Any]] = [
    ("ttl", 0),
    ("ttl", -5),
    ("ttl", "60"),
    ("ttl", float("nan")),
    ("max_attempts", 0),
    ("max_attempts", True),
    ("overlap", "sometimes"),
    ("catch_up", -1),
    ("jitter", -1),
    ("retries", -1),
    ("retries", 1.5),
    ("retry_backoff", -0.5),
    ("timeout", 0),
    ("timeout", "5"),
    ("heartbeat", 0),
    ("heartbeat", 60),  # more than half the default ttl (60 s)
]


def handler() -> None:
    """A job handler."""


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    """A client that is never used: registration sends nothing."""
    c = redis.Redis(port=1)
    yield c
    c.close()


@pytest.fixture
def runner(client: redis.Redis) -> CronRunner:
    return CronRunner(client, prefix="registrar")


@pytest.fixture
def ext_app(client: redis.Redis) -> tuple[CronLock, Any]:
    """An extension initialised on one app (registrations return that app's job)."""
    app = flask.Flask("registrar")
    ext = CronLock(app, client=client)
    return ext, app


def _dynamic_job(runner: CronRunner, options: dict[str, Any]) -> Job:
    """The job a runner builds from a stored dynamic schedule with these options."""
    payload = options.pop("payload", None)
    spec = ScheduleSpec(id="k", task="t", interval=60, payload=payload, options=options)
    runner.task("t")(handler)
    runner.tasks.reconcile({"k": spec.to_json()})
    return runner.job("k")


def _error(call: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises((ConfigurationError, TypeError)) as info:
        call()
    return type(info.value), str(info.value)


def test_the_table_names_every_job_options_field_once() -> None:
    """Each JobOptions field is filled by one option; option names are unique."""
    fields = [o.field for o in OPTIONS if o.field is not None]
    assert sorted(fields) == sorted(f.name for f in dataclasses.fields(JobOptions))
    assert len(OPTION_NAMES) == len(OPTIONS)
    assert set(GOOD) == OPTION_NAMES - {"key"}


def test_the_runner_and_the_flask_defaults_are_the_tables() -> None:
    """CronRunner's signature and the CRONLOCK_* defaults are RUNNER_DEFAULTS."""
    params = inspect.signature(CronRunner).parameters
    assert params["default_ttl"].default == RUNNER_DEFAULTS["ttl"]
    assert params["max_attempts"].default == RUNNER_DEFAULTS["max_attempts"]
    assert params["overlap"].default == RUNNER_DEFAULTS["overlap"]
    assert DEFAULTS["CRONLOCK_DEFAULT_TTL"] == RUNNER_DEFAULTS["ttl"]
    assert DEFAULTS["CRONLOCK_MAX_ATTEMPTS"] == RUNNER_DEFAULTS["max_attempts"]
    assert DEFAULTS["CRONLOCK_OVERLAP"] == RUNNER_DEFAULTS["overlap"]


def test_every_host_gives_a_job_without_options_the_same_defaults(
    runner: CronRunner, ext_app: tuple[CronLock, Any], client: redis.Redis
) -> None:
    """Runner, decorator, every(), Flask and a dynamic schedule: the table's defaults."""
    ext, _ = ext_app
    expected = parse_options("k", SCHEDULE, {})
    jobs = [
        runner.add_job(handler, SCHEDULE, key="k"),
        CronRunner(client).every(60).seconds.do(handler),
        ext.add_job(handler, SCHEDULE, key="k"),
        _dynamic_job(CronRunner(client), {}),
    ]
    runner2 = CronRunner(client)
    runner2.interval(seconds=60, key="k")(handler)
    jobs.append(runner2.job("k"))
    for job in jobs:
        assert job is not None
        assert job.options == expected


def test_every_host_accepts_every_option_alike(
    runner: CronRunner, ext_app: tuple[CronLock, Any], client: redis.Redis
) -> None:
    """The same options give the same JobOptions whichever host registers them."""
    ext, _ = ext_app
    expected = parse_options("k", SCHEDULE, GOOD)
    assert (expected.ttl_ms, expected.catch_up_ms) == (12_500, 7000)
    from_runner = runner.add_job(handler, SCHEDULE, key="k", **GOOD)
    from_flask = ext.add_job(handler, SCHEDULE, key="k", **GOOD)
    from_every = CronRunner(client).every(60, key="k", **GOOD).seconds.do(handler)
    app = flask.Flask("every")  # kept: an extension holds its apps weakly
    from_flask_every = CronLock(app, client=client).every(1, key="k", **GOOD).minutes.do(handler)
    dynamic = dict(GOOD, catch_up=7)  # JSON: seconds, not a timedelta
    from_dynamic = _dynamic_job(CronRunner(client), dynamic)
    for job in (from_runner, from_flask, from_every, from_flask_every, from_dynamic):
        assert job is not None
        assert job.options == expected
        assert job.options.payload == {"x": 1}


@pytest.mark.parametrize(("name", "value"), BAD, ids=[f"{n}={v!r}" for n, v in BAD])
def test_every_host_refuses_a_bad_value_with_the_same_message(
    runner: CronRunner, name: str, value: Any
) -> None:
    """add_job, the decorators, the Flask extension and a dynamic schedule: one error."""
    ext = CronLock()
    option = {name: value}
    expected = _error(lambda: parse_options("k", SCHEDULE, option))
    assert repr(value) in expected[1]
    assert f"{name} of job 'k'" in expected[1]
    calls: list[Callable[[], Any]] = [
        lambda: runner.add_job(handler, SCHEDULE, key="k", **option),
        lambda: runner.interval(60, key="k", **option)(handler),
        lambda: ext.add_job(handler, SCHEDULE, key="k", **option),
        lambda: ext.interval(60, key="k", **option)(handler),
        lambda: runner.every(60, key="k", **option).seconds.do(handler),
        lambda: ext.every(60, key="k", **option).seconds.do(handler),
        lambda: ScheduleSpec(id="k", task="t", interval=60, options=option).validate(),
    ]
    for call in calls:
        assert _error(call) == expected


def test_unknown_names_are_refused_alike(runner: CronRunner) -> None:
    """The runner and the extension refuse an unknown name with one message; a dynamic
    schedule names it too, listing the options a schedule may set."""
    ext = CronLock()
    known = "known options: " + ", ".join(sorted(OPTION_NAMES))
    expected = (ConfigurationError, f"unknown option(s) 'bogus'; {known}")
    assert _error(lambda: runner.interval(60, bogus=1)) == expected
    assert _error(lambda: ext.interval(60, bogus=1)) == expected
    assert _error(lambda: ext.cron("* * * * *", bogus=1)) == expected
    assert _error(lambda: runner.every(10, bogus=1)) == expected
    assert _error(lambda: ext.every(10, bogus=1)) == expected
    assert _error(lambda: runner.every(10, args=(1,))) == (
        ConfigurationError,
        f"unknown option(s) 'args'; {known}",
    )
    by_key = {
        _error(lambda: host.add_job(handler, SCHEDULE, key="k", bogus=1))  # noqa: B023
        for host in (runner, ext)
    }
    assert len(by_key) == 1
    dynamic = _error(
        lambda: ScheduleSpec(id="k", task="t", interval=60, options={"bogus": 1}).validate()
    )
    assert "'bogus' for schedule 'k'" in dynamic[1]
    assert "known options: " + ", ".join(DYNAMIC_OPTIONS) in dynamic[1]


def test_dynamic_schedules_and_the_cli_set_the_dynamic_options() -> None:
    """SCHEDULE_OPTIONS and `cronlock schedule add`'s flags are the table's dynamic rows."""
    assert SCHEDULE_OPTIONS == DYNAMIC_OPTIONS
    assert set(DYNAMIC_OPTIONS) == OPTION_NAMES - {"key", "payload"}
    args = build_parser().parse_args(["schedule", "add", "t", "--interval", "5"])
    assert {n for n in DYNAMIC_OPTIONS if hasattr(args, n)} == set(DYNAMIC_OPTIONS)
    flags = ["--" + n.replace("_", "-") for n in DYNAMIC_OPTIONS]
    values = {"overlap": "replace", "max_attempts": "2", "retries": "1"}
    argv = ["schedule", "add", "t", "--interval", "5"]
    for name, flag in zip(DYNAMIC_OPTIONS, flags):
        argv += [flag, values.get(name, "1.5")]
    parsed = build_parser().parse_args(argv)
    assert (parsed.max_attempts, parsed.overlap, parsed.ttl) == (2, "replace", 1.5)


def test_the_registration_calls_are_defined_once() -> None:
    """CronRunner and CronLock inherit every registration call from Registrar."""
    for name in ("add_job", "cron", "interval", "at", "every", "register", "task"):
        assert getattr(CronRunner, name) is getattr(Registrar, name)
        assert getattr(CronLock, name) is getattr(Registrar, name)


def test_a_spec_checks_its_key_schedule_and_option_names() -> None:
    """A JobSpec built by hand is refused like a registration call."""
    call = JobSpec.build(handler, SCHEDULE).call
    with pytest.raises(ConfigurationError, match="braces"):
        JobSpec("{k}", SCHEDULE, handler, call)
    with pytest.raises(ConfigurationError, match="Schedule"):
        JobSpec("k", "* * * * *", handler, call)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'bogus' for job 'k'"):
        JobSpec("k", SCHEDULE, handler, call, {"bogus": 1})
    spec = JobSpec.build(handler, SCHEDULE, options={"key": "k", "ttl": 5})
    assert (spec.key, dict(spec.options)) == ("k", {"ttl": 5})


def test_the_extension_hands_the_runner_the_users_function(
    ext_app: tuple[CronLock, Any],
) -> None:
    """A Flask job's handle names the user's function (the app context wraps only the call),
    and a task handler registered twice is, as on a runner, not an error."""
    ext, app = ext_app
    job = ext.add_job(handler, SCHEDULE, key="k")
    assert job is not None
    assert job.func is handler
    assert job is ext.runner_for(app).job("k")
    ext.task("t")(handler)
    ext.task("t")(handler)
    assert ext.runner_for(app).tasks.names() == ["t"]
    with pytest.raises(ConfigurationError, match="already registered"):
        ext.task("t")(print)


def test_every_takes_the_job_options_and_do_the_handlers_arguments(runner: CronRunner) -> None:
    """`every(10, key=...)` sets the job's options; `.do(fn, *args)` binds fn's arguments,
    so one function registered twice with distinct keys is two jobs."""
    alice = runner.every(10, key="send-alice", ttl=5).minutes.do(handler_of, "alice")
    bob = runner.every(10, key="send-bob").minutes.do(handler_of, "bob", loud=True)
    assert (alice.key, alice.options.ttl_ms, bob.options.ttl_ms) == ("send-alice", 5000, 60_000)
    assert (alice.call(None), bob.call(None)) == ((("alice",), {}), (("bob",), {"loud": True}))  # type: ignore[arg-type]


def test_the_duplicate_key_error_says_how_to_register_a_function_twice(
    runner: CronRunner, ext_app: tuple[CronLock, Any]
) -> None:
    """The second registration of one function under its default key is refused with an
    example of distinct keys; the runner and the extension say the same."""
    runner.every(10).minutes.do(handler_of, "alice")
    ext, _ = ext_app
    ext.every(10).minutes.do(handler_of, "alice")
    for host, where in ((runner, "in this runner"), (ext, "on this extension")):
        with pytest.raises(ConfigurationError) as info:
            host.every(10).minutes.do(handler_of, "bob")
        assert str(info.value).startswith(
            f"a job with key '{__name__}.handler_of' is already registered {where}. "
        )
        assert 'runner.every(10, key="send-alice").minutes.do(send, "alice")' in str(info.value)


def test_a_tag_after_do_is_kept_on_the_job(runner: CronRunner) -> None:
    """`.do(fn).tag("x")` (the order of the schedule docs) tags the job like
    `.tag("x").do(fn)`; an unhashable tag is refused."""
    after = runner.every(5, key="after").minutes.do(handler).tag("reports", "daily")
    before = runner.every(5, key="before").minutes.tag("reports", "daily").do(handler)
    assert after.tags == before.tags == {"reports", "daily"}
    assert after.tag("more") is after
    assert runner.job("after").tags == {"reports", "daily", "more"}
    with pytest.raises(TypeError, match="hashable"):
        after.tag([1])  # type: ignore[arg-type]


def handler_of(*args: Any, **kwargs: Any) -> Any:
    """A handler that returns its arguments."""
    return args, kwargs
