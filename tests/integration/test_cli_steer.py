"""The steering commands say what will happen (issue: operator edges, C7 and C8).

``trigger`` of a paused job is refused (3), a trigger no live runner can take says so,
``--expires`` is read as a duration; ``forget`` drops a job; ``jobs`` says when a
runner last had each job. Through the real CLI process, against a private Redis.
"""

from __future__ import annotations

import redis

from cronlock import Admin
from cronlock._keys import trigger_key
from cronlock.testing import RedisServer
from tests.integration.test_cli_ops import PREFIX, as_json, ops, seeded, server

__all__ = ["server"]  # the fixture, shared with test_cli_ops


def _queued(server: RedisServer) -> int:
    return int(redis.Redis.from_url(server.url).llen(trigger_key(PREFIX, "report")))


def test_a_trigger_of_a_paused_job_exits_3_and_queues_nothing(server: RedisServer) -> None:
    """Refused with the job named and --force offered; --force queues it."""
    seeded(server)
    admin = Admin(redis.Redis.from_url(server.url), PREFIX)
    admin.pause("report")
    out = ops(server, "trigger", "report")
    assert out.returncode == 3
    assert "'report' is paused" in out.stderr
    assert "--force" in out.stderr
    assert _queued(server) == 0
    assert ops(server, "trigger", "report", "--force").returncode == 0
    assert _queued(server) == 1


def test_a_trigger_no_live_runner_can_take_says_so(server: RedisServer) -> None:
    """Queued (exit 0) with a warning naming the job and the expiry; JSON has runners 0."""
    seeded(server)  # registered, but no runner is alive
    out = ops(server, "trigger", "report", "--expires", "5m")
    assert out.returncode == 0, out.stderr
    assert "no live runner has job 'report'" in out.stderr
    assert "0:05:00" in out.stderr
    data = as_json(ops(server, "trigger", "report", "--json"))
    assert (data["runners"], data["expires_in"]) == (0, 600.0)
    assert "no live runner" in data["warning"]


def test_a_bad_expires_is_a_usage_error_naming_it(server: RedisServer) -> None:
    """Exit 2, the option and the value named, nothing queued."""
    seeded(server)
    for bad in ("soon", "0", "-5m", "1e999"):
        out = ops(server, "trigger", "report", f"--expires={bad}")
        assert out.returncode == 2, (bad, out.stderr)
        assert "--expires" in out.stderr
        assert repr(bad) in out.stderr
    assert _queued(server) == 0


def test_forget_drops_a_job_from_the_listing(server: RedisServer) -> None:
    """forget KEY: gone from jobs; forgetting it again exits 1."""
    seeded(server)
    out = ops(server, "forget", "report")
    assert out.returncode == 0, out.stderr
    assert [j["key"] for j in as_json(ops(server, "jobs", "--json"))] == ["nightly"]
    assert ops(server, "forget", "report").returncode == 1
    assert ops(server, "forget", "").returncode == 2  # not a key: a usage error


def test_jobs_says_when_a_runner_last_had_each_job(server: RedisServer) -> None:
    """No live runner: runners 0, last_seen from the registry; the SEEN column is there."""
    seeded(server)
    data = {j["key"]: j for j in as_json(ops(server, "jobs", "--json"))}
    assert data["report"]["runners"] == 0
    assert data["report"]["last_seen"].startswith("2027-01-15")  # the seeding runner's clock
    header = ops(server, "jobs").stdout.splitlines()[0]
    assert "SEEN" in header.split()


def test_a_schedule_for_a_task_no_live_runner_has_warns(server: RedisServer) -> None:
    """Stored (exit 0, JSON unchanged), with a warning on stderr naming the task."""
    out = ops(server, "schedule", "add", "reindex", "--interval", "60")
    assert out.returncode == 0, out.stderr
    assert "no live runner has a handler for task 'reindex'" in out.stderr
