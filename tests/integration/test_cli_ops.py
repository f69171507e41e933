"""The operations commands through the real entry point (``python -m cronlock``), against
a private server, with real replica processes (``tests/ops_replica.py``) where a fleet
is needed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock
from cronlock.testing import RedisServer, wait_until
from tests import procs
from tests.history import ROOT, History
from tests.integration.test_cli import cli_env, cronlock

PREFIX = "ops-test"


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


def ops(server: RedisServer, *args: str) -> subprocess.CompletedProcess[str]:
    """``cronlock --redis-url URL --prefix ops-test ARGS``."""
    return cronlock("--redis-url", server.url, "--prefix", PREFIX, *args)


def as_json(out: subprocess.CompletedProcess[str]) -> Any:
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def seeded(server: RedisServer) -> CronRunner:
    """A runner (not started) that registered two jobs and ran one slot of "report"."""
    client = redis.Redis.from_url(server.url)
    runner = CronRunner(client, prefix=PREFIX, clock=FakeClock(1_800_000_000.0))
    runner.interval(seconds=10, key="report")(lambda: None)
    runner.cron("0 3 * * *", key="nightly")(lambda: None)
    runner.sync()
    runner.run_pending()
    return runner


class Fleet:
    """Replica processes running ``tests.ops_replica``."""

    def __init__(self, server: RedisServer, record_dir: Path) -> None:
        self.server, self.record_dir = server, record_dir
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *extra: str) -> None:
        args = [sys.executable, "-m", "tests.ops_replica", self.server.url]
        args += ["--record-dir", str(self.record_dir), "--prefix", PREFIX, *extra]
        proc = procs.spawn(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)  # before the wait: a replica that never gets ready is ended too
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"

    def stop(self) -> None:
        procs.end_all(self.procs, timeout=15)


@pytest.fixture
def fleet(server: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(server, tmp_path)
    yield f
    f.stop()


def test_jobs_table_and_json(server: RedisServer) -> None:
    """``jobs`` lists registered jobs with schedule, state and next run; --json parses."""
    seeded(server)
    out = ops(server, "jobs")
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split()[:3] == ["KEY", "SCHEDULE", "STATE"]
    assert [r.split()[0] for r in rows] == ["nightly", "report"]
    data = {j["key"]: j for j in as_json(ops(server, "jobs", "--json"))}
    assert data["report"]["status"] == "done"
    assert data["nightly"]["next_run"].endswith("03:00:00+00:00")


def test_history_of_one_job_and_of_all(server: RedisServer) -> None:
    """``history KEY`` shows the run's entries; ``history`` merges all jobs; --limit bounds."""
    seeded(server)
    entries = as_json(ops(server, "history", "report", "--json"))
    assert [e["event"] for e in entries] == ["succeeded", "running"]
    assert len(as_json(ops(server, "history", "--json", "--limit", "1"))) == 1
    out = ops(server, "history", "report")
    assert out.returncode == 0
    assert "succeeded" in out.stdout
    bad = ops(server, "history", "report", "--limit", "0")
    assert bad.returncode == 2
    assert "limit" in bad.stderr


def test_status_exit_code_follows_the_fleet(server: RedisServer, fleet: Fleet) -> None:
    """``status`` exits 1 with no live runner, 0 once one heartbeats."""
    seeded(server)
    out = ops(server, "status", "--json")
    assert out.returncode == 1
    assert as_json(out)["runners"] == 0
    fleet.start("--job", "hourly:3600:0")
    wait_until(lambda: Admin(redis.Redis.from_url(server.url), PREFIX).runners())
    out = ops(server, "status")
    assert out.returncode == 0, out.stdout
    assert "runners alive:    1" in out.stdout


def test_runners_lists_a_replica_process(server: RedisServer, fleet: Fleet) -> None:
    """``runners`` shows the replica's pid and its jobs."""
    fleet.start("--job", "hourly:3600:0")
    admin = Admin(redis.Redis.from_url(server.url), PREFIX)
    wait_until(admin.runners)
    data = as_json(ops(server, "runners", "--json"))
    assert [r["pid"] for r in data] == [fleet.procs[0].pid]
    assert data[0]["jobs"] == ["hourly"]
    assert str(fleet.procs[0].pid) in ops(server, "runners").stdout


def test_pause_resume_and_pause_all(server: RedisServer) -> None:
    """pause/resume KEY and --all write the flags; an unknown KEY is refused (3) unless
    --force; KEY+--all is 2."""
    seeded(server)
    admin = Admin(redis.Redis.from_url(server.url), PREFIX)
    assert ops(server, "pause", "report").returncode == 0
    assert admin.job("report").paused
    assert ops(server, "resume", "report").returncode == 0
    assert not admin.job("report").paused
    out = ops(server, "pause", "--all", "--json")
    assert as_json(out) == {"all": True, "paused": 2}
    assert all(j.paused for j in admin.jobs())
    assert ops(server, "resume", "--all").returncode == 0
    assert not any(j.paused for j in admin.jobs())
    refused = ops(server, "pause", "typo")
    assert refused.returncode == 3  # no runner has it: refused, nothing written
    assert "'typo'" in refused.stderr
    assert "--force" in refused.stderr
    assert not admin.job("report").paused
    with pytest.raises(KeyError):
        admin.job("typo")
    assert ops(server, "pause", "typo", "--force").returncode == 0
    assert admin.job("typo").paused
    assert ops(server, "pause", "report", "--all").returncode == 2


@pytest.mark.slow
def test_pause_from_the_cli_is_observed_by_every_replica(
    server: RedisServer, fleet: Fleet, tmp_path: Path
) -> None:
    """Two replica processes run a 1 s job; after ``pause`` neither starts it; ``resume``
    brings it back."""
    fleet.start("--job", "tick:1:0")
    fleet.start("--job", "tick:1:0")
    wait_until(lambda: len(History.read(tmp_path).events("start", "tick")) >= 2, timeout=15)
    assert ops(server, "pause", "tick").returncode == 0
    time.sleep(0.5)  # a claim sent before the pause may still start
    paused_at = time.time()
    time.sleep(2.5)
    starts = History.read(tmp_path).events("start", "tick")
    assert [s for s in starts if s["t"] > paused_at] == []
    assert ops(server, "resume", "tick").returncode == 0
    wait_until(
        lambda: any(s["t"] > paused_at for s in History.read(tmp_path).events("start", "tick")),
        timeout=10,
    )


@pytest.mark.slow
def test_trigger_from_the_cli_runs_once_in_the_fleet(
    server: RedisServer, fleet: Fleet, tmp_path: Path
) -> None:
    """Two replica processes, an hourly job: ``trigger`` makes exactly one of them run it."""
    fleet.start("--job", "hourly:3600:0.2", "--poll-interval", "30")
    fleet.start("--job", "hourly:3600:0.2", "--poll-interval", "30")
    admin = Admin(redis.Redis.from_url(server.url), PREFIX)
    wait_until(lambda: len(admin.runners()) == 2)
    out = ops(server, "trigger", "hourly", "--json")
    assert out.returncode == 0, out.stderr
    request = as_json(out)["trigger"]
    wait_until(lambda: History.read(tmp_path).events("end", "hourly"), timeout=10)
    time.sleep(1)  # would a second replica also run it?
    starts = History.read(tmp_path).events("start", "hourly")
    assert len(starts) == 1
    assert starts[0]["pid"] in {p.pid for p in fleet.procs}
    assert any(e.trigger_id == request for e in admin.history("hourly"))
    assert ops(server, "trigger", "nope").returncode == 1


@pytest.mark.slow
def test_a_schedule_added_from_the_cli_runs_on_exactly_one_replica(
    server: RedisServer, fleet: Fleet, tmp_path: Path
) -> None:
    """``schedule add`` (1 s interval, JSON payload) reaches two replicas; each slot runs
    once with the payload; ``schedule remove`` stops it."""
    fleet.start("--task", "reindex:0.05")
    fleet.start("--task", "reindex:0.05")
    out = ops(
        server,
        "schedule",
        "add",
        "reindex",
        "--interval",
        "1",
        "--id",
        "idx",
        "--payload",
        '{"index": "users"}',
        "--json",
    )
    assert out.returncode == 0, out.stderr
    assert as_json(out)["schedule"] == "every 1 s on the UTC grid"
    wait_until(lambda: len(History.read(tmp_path).events("end", "idx")) >= 4, timeout=20)
    listed = as_json(ops(server, "schedule", "list", "--json"))
    assert [s["id"] for s in listed] == ["idx"]
    assert ops(server, "schedule", "remove", "idx").returncode == 0
    assert ops(server, "schedule", "remove", "idx").returncode == 1
    time.sleep(1.5)  # a slot claimed just before the removal may still run
    history = History.read(tmp_path)
    slots = history.starts_by_slot("idx")
    assert all(len(starts) == 1 for starts in slots.values()), slots
    assert {s["payload"]["index"] for s in history.events("start", "idx")} == {"users"}
    removed_at = time.time()
    time.sleep(2)
    assert [s for s in History.read(tmp_path).events("start", "idx") if s["t"] > removed_at] == []


def test_schedule_add_refuses_invalid_input(server: RedisServer) -> None:
    """A bad cron, a non-JSON payload or both --cron and --interval exit 2; nothing stored."""
    for args in (
        ["--cron", "61 * * * *"],
        ["--interval", "5", "--payload", "{nope"],
        ["--cron", "* * * * *", "--interval", "5"],
    ):
        out = ops(server, "schedule", "add", "reindex", *args)
        assert out.returncode == 2, (args, out.stderr)
    assert as_json(ops(server, "schedule", "list", "--json")) == []
    assert "no dynamic schedules" in ops(server, "schedule", "list").stdout


def test_run_starts_a_runner_and_stops_on_sigterm(server: RedisServer, tmp_path: Path) -> None:
    """``run module:attr`` starts the runner (it heartbeats) and exits 0 on SIGTERM."""
    (tmp_path / "myjobs.py").write_text(
        "import os, redis\n"
        "from cronlock import CronRunner\n"
        "runner = CronRunner(redis.Redis.from_url(os.environ['URL']), prefix='ops-test')\n"
        "runner.interval(seconds=3600, key='hourly')(lambda: None)\n"
    )
    with procs.running(
        [sys.executable, "-m", "cronlock", "run", "myjobs:runner"],
        cwd=tmp_path,
        env=cli_env(URL=server.url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert "running" in proc.stdout.readline()
        admin = Admin(redis.Redis.from_url(server.url), PREFIX)
        wait_until(admin.runners, timeout=10)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stderr is not None
        assert "stopped" in proc.stderr.read()
        assert admin.runners() == []


def test_run_refuses_what_is_not_a_runner(tmp_path: Path) -> None:
    """A missing module, a missing attribute or a non-runner exit 2 with the reason."""
    (tmp_path / "notjobs.py").write_text("thing = 42\n")
    for target, word in (
        ("nosuch:runner", "import"),
        ("notjobs:nope", "attribute"),
        ("notjobs:thing", "not a CronRunner"),
        ("notjobs", "MODULE:ATTR"),
    ):
        out = cronlock("run", target, cwd=tmp_path)
        assert out.returncode == 2, (target, out.stderr)
        assert word in out.stderr
