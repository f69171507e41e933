"""Hostile input: bad values refused before Redis is touched; data that is not ours.

Each bad input must raise ``ConfigurationError`` (a ``ValueError``) or ``TypeError``,
with a message naming the value, and must send no command that writes (the database
stays empty and no script runs).
"""

# ruff: noqa: E501 - one bad input per line reads best as a table

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Callable

import pytest
import redis

from cronlock import CronRunner, exclusive, redis_lock
from cronlock.errors import ConfigurationError
from cronlock.schedules import IntervalSchedule
from cronlock.testing import RedisServer


def _f(ctx: Any) -> None:
    pass


@pytest.fixture
def db(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client(socket_timeout=5)
    client.flushdb()
    yield client
    client.close()


def _runner(client: Any) -> CronRunner:
    return CronRunner(client, prefix="bad")


LONG = "x" * 10240

# (id, call(client), exception type, text the message must contain)
CASES: list[tuple[str, Callable[[Any], Any], type[BaseException], str]] = [
    ("cron-garbage", lambda c: _runner(c).cron("not a cron")(_f), ConfigurationError, "not a cron"),
    ("cron-minute-61", lambda c: _runner(c).cron("61 * * * *")(_f), ConfigurationError, "61"),
    ("cron-six-fields", lambda c: _runner(c).cron("* * * * * * *")(_f), ConfigurationError, "* * * * * * *"),
    ("cron-empty", lambda c: _runner(c).cron("")(_f), ConfigurationError, "''"),
    ("tz-unknown", lambda c: _runner(c).cron("* * * * *", timezone="Mars/Olympus")(_f), ConfigurationError, "Mars/Olympus"),
    ("tz-not-str", lambda c: _runner(c).cron("* * * * *", timezone=5)(_f), (ConfigurationError, TypeError), "5"),
    ("interval-zero", lambda c: _runner(c).interval(0)(_f), ConfigurationError, "seconds=0"),
    ("interval-negative", lambda c: _runner(c).interval(-1)(_f), ConfigurationError, "-1"),
    ("interval-nan", lambda c: _runner(c).interval(float("nan"))(_f), ConfigurationError, "nan"),
    ("interval-str", lambda c: _runner(c).interval("10")(_f), TypeError, "'10'"),
    ("interval-bool", lambda c: _runner(c).interval(True)(_f), TypeError, "True"),
    ("ttl-zero", lambda c: _runner(c).interval(1, ttl=0)(_f), ConfigurationError, "0"),
    ("ttl-negative", lambda c: _runner(c).interval(1, ttl=-5)(_f), ConfigurationError, "-5"),
    ("ttl-inf", lambda c: _runner(c).interval(1, ttl=float("inf"))(_f), ConfigurationError, "inf"),
    ("ttl-str", lambda c: _runner(c).interval(1, ttl="60")(_f), TypeError, "'60'"),
    ("key-trailing-space", lambda c: _runner(c).interval(1, key="job ")(_f), ConfigurationError, "'job '"),
    ("key-newline", lambda c: _runner(c).interval(1, key="a\nb")(_f), ConfigurationError, "'a\\nb'"),
    ("key-tab", lambda c: _runner(c).interval(1, key="a\tb")(_f), ConfigurationError, "'a\\tb'"),
    ("key-braces", lambda c: _runner(c).interval(1, key="{tag}")(_f), ConfigurationError, "'{tag}'"),
    ("key-zero-width", lambda c: _runner(c).interval(1, key="caf\u00e9\u200b")(_f), ConfigurationError, "caf"),
    ("key-10kB", lambda c: _runner(c).interval(1, key=LONG)(_f), ConfigurationError, "10240"),
    ("key-empty", lambda c: _runner(c).interval(1, key="")(_f), ConfigurationError, "''"),
    ("key-int", lambda c: _runner(c).interval(1, key=5)(_f), TypeError, "5"),
    ("handler-not-callable", lambda c: _runner(c).add_job(42, IntervalSchedule(1)), ConfigurationError, "42"),
    ("handler-two-params", lambda c: _runner(c).interval(1, key="k")(lambda a, b: None), ConfigurationError, "lambda"),
    ("schedule-not-schedule", lambda c: _runner(c).add_job(_f, "*/5 * * * *", key="k"), ConfigurationError, "*/5"),
    ("option-unknown", lambda c: _runner(c).interval(1, bogus=1)(_f), ConfigurationError, "bogus"),
    ("overlap-unknown", lambda c: _runner(c).interval(1, key="k", overlap="sometimes")(_f), ConfigurationError, "sometimes"),
    ("max-attempts-zero", lambda c: _runner(c).interval(1, key="k", max_attempts=0)(_f), ConfigurationError, "0"),
    ("catch-up-negative", lambda c: _runner(c).interval(1, key="k", catch_up=-1)(_f), ConfigurationError, "-1"),
    ("jitter-negative", lambda c: _runner(c).interval(1, key="k", jitter=-1)(_f), ConfigurationError, "-1"),
    ("retries-negative", lambda c: _runner(c).interval(1, key="k", retries=-1)(_f), ConfigurationError, "-1"),
    ("timeout-zero", lambda c: _runner(c).interval(1, key="k", timeout=0)(_f), ConfigurationError, "timeout of job 'k'"),
    ("timeout-negative", lambda c: _runner(c).interval(1, key="k", timeout=-2)(_f), ConfigurationError, "-2"),
    ("timeout-str", lambda c: _runner(c).interval(1, key="k", timeout="5")(_f), TypeError, "'5'"),
    ("wait-replicas-negative", lambda c: CronRunner(c, wait_replicas=-1), ConfigurationError, "-1"),
    ("wait-timeout-zero", lambda c: CronRunner(c, wait_replicas=1, wait_timeout=0), ConfigurationError, "wait_timeout"),
    ("at-garbage", lambda c: _runner(c).at("next tuesday")(_f), ConfigurationError, "next tuesday"),
    ("at-naive", lambda c: _runner(c).at(datetime(2030, 1, 1))(_f), ConfigurationError, "2030"),
    ("runner-no-client", lambda c: CronRunner(None), TypeError, "None"),
    ("runner-url-not-client", lambda c: CronRunner("redis://localhost"), TypeError, "redis://localhost"),
    ("runner-prefix-braces", lambda c: CronRunner(c, prefix="a{b}"), ConfigurationError, "a{b}"),
    ("runner-workers-zero", lambda c: CronRunner(c, max_workers=0), ConfigurationError, "0"),
    ("runner-ttl-zero", lambda c: CronRunner(c, default_ttl=0), ConfigurationError, "0"),
    ("runner-clock-str", lambda c: CronRunner(c, clock="now"), ConfigurationError, "now"),
    ("runner-after-fork", lambda c: CronRunner(c, after_fork="ignore"), ConfigurationError, "ignore"),
    ("runner-duplicate-key", lambda c: [_runner_twice(c)], ConfigurationError, "'dup'"),
    ("lock-braces", lambda c: redis_lock(c, "{x}", ttl=1).__enter__(), ConfigurationError, "{x}"),
    ("lock-ttl-zero", lambda c: redis_lock(c, "k", ttl=0).__enter__(), ConfigurationError, "0"),
    ("lock-wait-negative", lambda c: redis_lock(c, "k", ttl=1, wait=-1).__enter__(), ConfigurationError, "-1"),
    ("lock-not-client", lambda c: redis_lock(object(), "k", ttl=1).__enter__(), TypeError, "object"),
    ("lock-key-10kB", lambda c: redis_lock(c, LONG, ttl=1).__enter__(), ConfigurationError, "10240"),
    ("exclusive-ttl-negative", lambda c: exclusive("k", ttl=-1, client=c)(_f), ConfigurationError, "-1"),
]  # fmt: skip


def _runner_twice(client: Any) -> None:
    runner = _runner(client)
    runner.interval(1, key="dup")(_f)
    runner.interval(2, key="dup")(_f)


def _writes(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    ignore = {"cmdstat_info", "cmdstat_dbsize", "cmdstat_flushdb", "cmdstat_ping", "cmdstat_hello"}
    return {k: v["calls"] for k, v in stats.items() if k not in ignore}


@pytest.mark.parametrize(
    ("call", "error", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_refused_naming_the_value_and_writes_nothing(
    db: redis.Redis, call: Callable[[Any], Any], error: Any, text: str
) -> None:
    """A bad value raises ConfigurationError/TypeError naming it; Redis sees no command."""
    before = _writes(db)
    with pytest.raises(error) as info:
        call(db)
    assert text in str(info.value), str(info.value)
    assert db.dbsize() == 0
    assert _writes(db) == before


def test_the_table_has_at_least_30_cases() -> None:
    """The bad-input table covers at least 30 distinct inputs."""
    assert len({c[0] for c in CASES}) >= 30
