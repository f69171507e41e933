"""Methods as jobs: a registration call refuses an unbound method; markers plus
`register(obj)` register bound ones (no Redis: registration sends nothing)."""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Iterator
from typing import Any, Callable

import pytest
import redis

import cronlock
from cronlock import ConfigurationError, CronRunner, JobContext, marks
from cronlock.schedules import CronSchedule, IntervalSchedule

flask = pytest.importorskip("flask")

from cronlock.flask import CronLock  # noqa: E402

METHOD_ADVICE = "register an instance with runner.register(obj)"


@pytest.fixture
def runner() -> Iterator[CronRunner]:
    """A runner on a client that is never used."""
    client = redis.Redis(port=1)
    yield CronRunner(client, prefix="marks")
    client.close()


class Billing:
    """A class with marked methods, one of each kind."""

    def __init__(self, region: str) -> None:
        self.region = region

    @cronlock.interval(minutes=5, ttl=120)
    def sync(self, ctx: JobContext) -> None:
        """Takes the context."""

    @cronlock.cron("H 2 * * *", timezone="Europe/Athens", key="nightly")
    def close_day(self) -> None:
        """Takes none."""

    @marks.at("2100-01-01T00:00:00+00:00")
    def once(self) -> None:
        """A one-off."""

    @property
    def expensive(self) -> str:
        raise AssertionError("register() must not evaluate properties")

    def plain(self) -> None:
        """Not marked: not registered."""


class EuBilling(Billing):
    """A subclass: its jobs have its own keys; an unmarked override is not a job."""

    def once(self) -> None:
        """Overridden without a mark."""


def test_a_registration_call_refuses_a_method_at_decoration_time(runner: CronRunner) -> None:
    """`@runner.interval` on `def sync(self)` in a class body raises there, saying what
    to do; so do the other calls given a class's function."""
    with pytest.raises(ConfigurationError) as info:

        class Jobs:
            @runner.interval(60)
            def sync(self) -> None: ...

    message = str(info.value)
    assert message.startswith("test_a_registration_call_refuses_a_method_at_decoration_time")
    assert "Jobs.sync is a method (defined in a class body, first parameter 'self')" in message
    assert "it would be called with the JobContext as self" in message
    assert "@cronlock.interval(...)" in message
    assert METHOD_ADVICE in message
    assert "runner.add_job(obj.sync, schedule, key=...)" in message
    assert runner.jobs == []

    calls: list[Callable[[], Any]] = [
        lambda: runner.cron("* * * * *")(Billing.close_day),
        lambda: runner.at("2100-01-01T00:00:00+00:00")(Billing.plain),
        lambda: runner.every(10).seconds.do(Billing.plain),
        lambda: runner.add_job(Billing.plain, IntervalSchedule(60)),
        lambda: runner.task("t")(Billing.plain),
        lambda: CronLock().interval(60)(Billing.plain),
    ]
    for call in calls:
        with pytest.raises(ConfigurationError, match=re.escape(METHOD_ADVICE)):
            call()
    assert runner.jobs == []
    assert runner.tasks.names() == []


def test_a_decorated_method_and_a_classmethods_function_are_refused(runner: CronRunner) -> None:
    """A method behind a functools.wraps decorator is still a method; so is `cls` first."""

    def logged(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            return fn(*args)

        return wrapper

    with pytest.raises(ConfigurationError, match="first parameter 'self'"):

        class Jobs:
            @runner.interval(60)
            @logged
            def sync(self) -> None: ...

    with pytest.raises(ConfigurationError, match="first parameter 'cls'"):

        class Other:
            @runner.interval(60)
            def sync(cls) -> None: ...


def test_functions_that_are_not_methods_are_accepted(runner: CronRunner) -> None:
    """Nested functions, bound methods, and a class-body function without self run as
    before; a task handed to a Flask app's runner (a wrapper named like the method) too."""

    def nested() -> None: ...

    class Static:
        @runner.interval(60, key="static")
        def tick() -> None:  # type: ignore[misc]
            """Called bare: nothing is passed as self."""

    billing = Billing("eu")
    runner.interval(60)(nested)
    runner.add_job(billing.plain, IntervalSchedule(60))
    runner.every(10, key="bound").seconds.do(billing.sync)
    assert {j.key for j in runner.jobs} == {
        f"{__name__}.test_functions_that_are_not_methods_are_accepted.<locals>.nested",
        f"{__name__}.Billing.plain",
        "static",
        "bound",
    }
    app = flask.Flask("marks")
    ext = CronLock(app, client=redis.Redis(port=1))
    ext.task("t")(billing.plain)
    assert ext.runner_for(app).tasks.names() == ["t"]


def test_markers_keep_the_registration_on_the_function() -> None:
    """A marker returns the function itself with its marks; nothing needs a runner."""
    (mark,) = marks.marks_of(Billing.sync)
    assert mark.schedule_for("any") == IntervalSchedule(300)
    assert dict(mark.options) == {"ttl": 120}
    assert marks.marks_of(Billing("x").sync) == (mark,)
    assert marks.marks_of(Billing.plain) == ()
    assert (cronlock.cron, cronlock.interval, cronlock.at) == (marks.cron, marks.interval, marks.at)
    assert isinstance(cronlock.marks, types.ModuleType)

    def both() -> None: ...

    assert marks.interval(60, key="a")(marks.cron("0 * * * *", key="b")(both)) is both
    assert [m.key for m in marks.marks_of(both)] == ["b", "a"]


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (lambda: marks.interval(60, bogus=1), "unknown option(s) 'bogus'"),
        (lambda: marks.interval(60, ttl=0), "ttl of job "),
        (lambda: marks.cron("61 * * * *"), "61"),
        (lambda: marks.at("yesterday"), "yesterday"),
        (lambda: marks.interval(0), "interval"),
        (lambda: marks.interval(60)(print), "defined with def"),
    ],
    ids=["unknown-option", "bad-ttl", "bad-cron", "bad-when", "zero-interval", "builtin"],
)
def test_a_marker_refuses_bad_arguments_at_import(marker: Callable[[], Any], message: str) -> None:
    """A marker checks schedule and options when the class body runs, like the decorators."""

    def job() -> None: ...

    with pytest.raises((ConfigurationError, TypeError), match=re.escape(message)):
        marker()(job)


def test_register_adds_the_marked_bound_methods_with_their_keys(runner: CronRunner) -> None:
    """Keys default to module.Class.method; a marker's key= wins; handles are returned."""
    billing = Billing("eu")
    jobs = runner.register(billing)
    assert [j.key for j in jobs] == [
        f"{__name__}.Billing.sync",
        "nightly",
        f"{__name__}.Billing.once",
    ]
    assert jobs == runner.jobs
    sync, nightly, _ = jobs
    assert sync.func == billing.sync
    assert sync.func.__self__ is billing
    assert sync.options.ttl_ms == 120_000
    assert nightly.schedule == CronSchedule("H 2 * * *", "Europe/Athens", hash_id="nightly")


def test_a_subclass_instance_has_its_own_keys(runner: CronRunner) -> None:
    """Keys name the instance's class; an override without a mark is not a job."""
    keys = [j.key for j in runner.register(EuBilling("eu"))]
    assert keys == [f"{__name__}.EuBilling.sync", "nightly"]


def test_registering_one_instance_twice_is_the_duplicate_key_error(runner: CronRunner) -> None:
    """The second register() adds nothing and says how to register a second instance."""
    runner.register(Billing("eu"))
    with pytest.raises(ConfigurationError) as info:
        runner.register(Billing("us"))
    assert f"a job with key '{__name__}.Billing.sync' is already registered" in str(info.value)
    assert 'runner.register(obj, key_prefix="eu")' in str(info.value)
    assert len(runner.jobs) == 3
    prefixed = runner.register(Billing("us"), key_prefix="us")
    assert [j.key for j in prefixed] == ["us.sync", "us.nightly", "us.once"]


def test_register_refuses_a_class_and_a_target_without_marks(runner: CronRunner) -> None:
    """A class (its methods need self) and an object with nothing marked are refused."""
    with pytest.raises(
        ConfigurationError, match=r"register an instance, e.g. runner.register\(Billing"
    ):
        runner.register(Billing)
    with pytest.raises(ConfigurationError, match="nothing to register in"):
        runner.register(object())
    assert runner.jobs == []


def test_register_checks_every_job_before_adding_one(runner: CronRunner) -> None:
    """Two marks with one key, or a handler with a bad signature: nothing is added."""

    class Clash:
        @marks.interval(60, key="same")
        def a(self) -> None: ...

        @marks.interval(30, key="same")
        def b(self) -> None: ...

    class BadSignature:
        @marks.interval(60)
        def ok(self) -> None: ...

        @marks.interval(60)
        def needs_two(self, ctx: JobContext, extra: int) -> None: ...

    with pytest.raises(ConfigurationError, match="would both have the key 'same'"):
        runner.register(Clash())
    with pytest.raises(ConfigurationError, match="requires 2"):
        runner.register(BadSignature())
    assert runner.jobs == []


def test_register_a_modules_marked_functions(runner: CronRunner) -> None:
    """A module's functions marked there are its jobs (module.function); one it imported is not."""
    module = types.ModuleType("billing_jobs")
    exec(  # a module from source: its functions' __module__ is the module's name
        "import cronlock\n"
        "from cronlock.marks import marks_of\n"
        "@cronlock.interval(60)\n"
        "def refresh(): pass\n"
        "@cronlock.cron('0 3 * * *', key='report')\n"
        "def nightly(ctx): pass\n"
        "alias = refresh\n"
        "def unmarked(): pass\n",
        module.__dict__,
    )
    module.imported = Billing.sync  # type: ignore[attr-defined]  # marked elsewhere
    jobs = runner.register(module)
    assert [j.key for j in jobs] == ["billing_jobs.refresh", "report"]
    assert [j.key for j in runner.register(module, key_prefix="b")] == ["b.refresh", "b.report"]


def test_the_flask_extension_registers_marked_methods() -> None:
    """`ext.register(obj)` keeps the jobs for every app, like its decorators: before
    `init_app` there is no handle, after it the app's runner has them."""
    ext = CronLock(client=redis.Redis(port=1))
    assert ext.register(Billing("eu")) == [None, None, None]
    app = flask.Flask("marks")
    ext.init_app(app)
    keys = [j.key for j in ext.runner_for(app).jobs]
    assert keys == [f"{__name__}.Billing.sync", "nightly", f"{__name__}.Billing.once"]
    one = flask.Flask("one")
    (job, *_) = CronLock(one, client=redis.Redis(port=1)).register(Billing("eu"))
    assert job is not None
    assert job.key == f"{__name__}.Billing.sync"
