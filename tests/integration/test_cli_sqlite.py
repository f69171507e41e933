"""The CLI on a SQLite store (``--store-url sqlite:///...``): the same commands, the same
answers as on Redis, locks and ``exec --slot`` included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cronlock import Admin, CronRunner, FakeClock
from cronlock.stores import SqliteStore, from_url, store_lock
from tests.integration.test_cli import cli_env, cronlock

PREFIX = "lite"
T0 = 1_800_000_000.0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite file where a runner registered two jobs and ran one slot of "report"."""
    path = tmp_path / "jobs.db"
    runner = CronRunner(SqliteStore(path, PREFIX), prefix=PREFIX, clock=FakeClock(T0))
    runner.interval(seconds=10, key="report")(lambda: None)
    runner.cron("0 3 * * *", key="nightly")(lambda: None)
    runner.task("export")(lambda: None)
    runner.sync()
    runner.run_pending()
    return path


def lite(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return cronlock(
        "--prefix", PREFIX, *args, env=cli_env(CRONLOCK_STORE_URL=f"sqlite:///{db}", **env)
    )


def as_json(out: subprocess.CompletedProcess[str], code: int = 0) -> Any:
    assert out.returncode == code, out.stderr
    return json.loads(out.stdout)


def test_jobs_and_history_read_the_sqlite_file(db: Path) -> None:
    """jobs and history show what the runner wrote, as on Redis."""
    jobs = {j["key"]: j for j in as_json(lite(db, "jobs", "--json"))}
    assert sorted(jobs) == ["nightly", "report"]
    assert jobs["report"]["status"] == "done"
    events = [e["event"] for e in as_json(lite(db, "history", "report", "--json"))]
    assert events == ["succeeded", "running"]


def test_pause_resume_and_trigger_write_the_sqlite_file(db: Path) -> None:
    """pause and trigger through the CLI are what Admin on the same file reads."""
    assert lite(db, "pause", "nightly").returncode == 0
    assert as_json(lite(db, "trigger", "report", "--json"))["key"] == "report"
    admin = Admin(SqliteStore(db, PREFIX))
    assert admin.job("nightly").paused
    assert admin.job("report").pending_triggers == 1
    assert lite(db, "resume", "nightly").returncode == 0
    assert not admin.job("nightly").paused


def test_status_and_schedules(db: Path) -> None:
    """status counts the jobs (exit 1: no live runner); schedules add and list."""
    status = as_json(lite(db, "status", "--json"), code=1)
    assert (status["jobs"], status["runners"]) == (2, 0)
    added = as_json(
        lite(db, "schedule", "add", "export", "--interval", "60", "--id", "e1", "--json")
    )
    assert added["id"] == "e1"
    assert [s.id for s in Admin(SqliteStore(db, PREFIX)).list_schedules()] == ["e1"]


def test_doctor_checks_what_every_store_has(db: Path) -> None:
    """On SQLite doctor checks that the store answers and its clock, and says the Redis
    server checks do not apply (exit 0, no failure)."""
    out = as_json(lite(db, "doctor", "--json"))
    names = {c["name"]: c for c in out["checks"]}
    assert list(names) == ["reachable", "clock", "store"]
    assert {c["status"] for c in out["checks"]} == {"pass"}
    assert "do not apply" in names["store"]["detail"]


HELD_INSIDE = (
    "import sys; from cronlock import LockNotAcquired; from cronlock.stores import SqliteStore,"
    " store_lock\ntry:\n    store_lock(SqliteStore(sys.argv[1], 'lite'), 'k', 5).acquire()\n"
    "except LockNotAcquired:\n    sys.exit(0)\nsys.exit(9)"
)


def test_exec_runs_the_command_under_the_sqlite_lock(db: Path) -> None:
    """exec on SQLite: the command runs while the lock is held (its own acquire of the
    same key fails), exec exits with its status and the lock is free afterwards."""
    out = lite(
        db, "exec", "--key", "k", "--ttl", "5", "--", sys.executable, "-c", HELD_INSIDE, str(db)
    )
    assert out.returncode == 0, out.stderr
    with store_lock(SqliteStore(db, PREFIX), "k", ttl=5) as lock:
        assert lock.held


def test_exec_and_locks_while_another_process_holds_it(db: Path) -> None:
    """Held by someone else: exec exits 75 without running; locks shows the holder and its
    fencing token; once released, ``locks k`` exits 1 (free)."""
    with store_lock(SqliteStore(db, PREFIX), "k", ttl=30) as lock:
        out = lite(db, "exec", "--key", "k", "--ttl", "5", "--", "false")
        assert out.returncode == 75
        assert "held by another owner" in out.stderr
        shown = as_json(lite(db, "locks", "--json"))
        assert [(i["key"], i["fencing_token"]) for i in shown] == [("k", lock.fencing_token)]
        assert shown[0]["holder"].endswith(f":{os.getpid()}")
        assert 0 < shown[0]["ttl_remaining"] <= 30
    assert lite(db, "locks", "k").returncode == 1


def test_exec_slot_runs_each_occurrence_once_on_sqlite(db: Path, tmp_path: Path) -> None:
    """--slot on SQLite: the first run of an occurrence runs the command (CRONLOCK_SLOT set),
    a second run of the same occurrence exits 75 without running it."""
    runs = tmp_path / "runs"
    slot = ("--slot", "0 0 1 1 *", "--timezone", "UTC", "--slot-grace", "40000000")
    record = ("sh", "-c", 'echo "$CRONLOCK_SLOT" >> "$0"', str(runs))
    first = lite(db, "exec", "--key", "k", "--ttl", "5", *slot, "--", *record)
    second = lite(db, "exec", "--key", "k", "--ttl", "5", *slot, "--", *record)
    assert (first.returncode, second.returncode) == (0, 75), second.stderr
    assert "already claimed" in second.stderr
    year = time.gmtime().tm_year
    assert runs.read_text().split() == [f"{year}-01-01T00:00:00Z"]


def test_from_url_reads_relative_and_absolute_sqlite_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlite:///rel.db is under the working directory, sqlite:////abs.db absolute; the
    query's busy_timeout reaches the store; both files are real, shared stores."""
    monkeypatch.chdir(tmp_path)
    relative = from_url("sqlite:///rel.db?busy_timeout=2", prefix="p")
    assert isinstance(relative, SqliteStore)
    assert relative.path == "rel.db"
    relative.pause("k")
    assert (tmp_path / "rel.db").is_file()
    assert SqliteStore(tmp_path / "rel.db", "p").job_states(["k"])[0].fields["paused"] == "1"
    absolute = from_url(f"sqlite:///{tmp_path}/abs.db", prefix="p")
    assert isinstance(absolute, SqliteStore)
    assert absolute.path == f"{tmp_path}/abs.db"
    absolute.ping()
    assert (tmp_path / "abs.db").is_file()
