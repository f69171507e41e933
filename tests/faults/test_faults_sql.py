"""The store-level fault scenarios on the SQL stores: replica processes on PostgreSQL and SQLite.

The same replica processes (``tests/replica.py``, given a ``postgresql://`` or
``sqlite:///`` URL) and the same checker as on Redis. On both stores: kill -9 of the
running owner and SIGSTOP of the owner past its lease (``sql_url``: a private
PostgreSQL per scenario, or a new SQLite file). On PostgreSQL also: the server killed
and started again, the server frozen, and the owner's network cut (a `TcpProxy` in
front of it). Unlike a private Redis, PostgreSQL keeps its data over a kill: a
restart is an outage, not a reset, so fencing tokens keep increasing across it.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from cronlock.stores import from_url
from cronlock.testing import TcpProxy
from tests.faults.checker import Fault, JobSpec, Report, check
from tests.history import History, Replicas, kill, wait_for_record

pytestmark = [pytest.mark.slow, pytest.mark.faults]

Record = Callable[[Report], Report]


def specs(jobs: list[str]) -> list[JobSpec]:
    return [JobSpec.parse(j) for j in jobs]


def start_of(record_dir: Path, job: str, after: float, alive: set[int]) -> dict[str, Any]:
    return wait_for_record(
        record_dir,
        lambda r: (
            r["event"] == "start" and r["job"] == job and r["t"] > after and r["pid"] in alive
        ),
        timeout=20,
    )


def fence_of(url: str, job: str) -> int:
    """The fencing token the store at ``url`` holds for ``job`` (from its state row)."""
    store = from_url(url, prefix="replica-test")
    try:
        [state] = store.job_states([job])
    finally:
        getattr(store, "close", lambda: None)()
    return int(state.fields.get("fence", 0))


@pytest.fixture(params=["postgres", "sqlite"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A private PostgreSQL's DSN, or a new SQLite file's URL."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg").dsn)
    return f"sqlite:///{tmp_path / 'jobs.db'}"


def label(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "pg"


def test_sql_kill_9_of_the_running_owner_is_taken_over(
    sql_url: str, record_dir: Path, record_report: Record
) -> None:
    """kill -9 of the slot's owner, 3 times: each slot is taken over as the next attempt
    within ttl + ttl/3 + margin, never overlaps, finishes once."""
    jobs = ["victim:5:2:1.2", "short:1:0.1:2"]
    replicas = Replicas(sql_url, record_dir, jobs)
    faults: list[Fault] = []
    try:
        replicas.start_many(3)
        t0 = time.time()
        last = t0
        for delay in (0.2, 0.6, 1.0):
            run = start_of(record_dir, "victim", last, {p.pid for p in replicas.alive()})
            time.sleep(delay)
            kill(int(run["pid"]))
            last = time.time()
            faults.append(Fault("kill", last, pid=int(run["pid"])))
            replicas.spawn()  # a replacement joins, as a supervisor would restart it
        time.sleep(3)
        t1 = time.time() - 3
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    report = record_report(
        check(
            f"P2 {label(sql_url)} kill -9 owner x3", history, specs(jobs), (t0, t1), tuple(faults)
        )
    )
    report.assert_guarantees()
    assert len(report.takeover_delays) + report.explained["exhausted"] == 3, report.notes
    starts = history.events("start", "victim")
    # the run each kill cut short: its pid's latest start before it (the same pid may have
    # run earlier slots to the end)
    killed = {
        max((r for r in starts if r["pid"] == f.pid and r["t"] < f.at), key=lambda r: r["t"])[
            "slot"
        ]
        for f in faults
    }
    retried = {r["slot"] for r in starts if r["attempt"] >= 2}
    assert killed <= retried, "each killed slot ran again as attempt 2+"


def test_sql_sigstop_owner_past_its_lease_wakes_cancelled(
    sql_url: str, record_dir: Path, record_report: Record
) -> None:
    """SIGSTOP of the owner for 2.5 s (lease 1.2 s), then SIGCONT, twice: a successor takes
    over, the woken owner's run is cancelled, its finish refused, its fence stale."""
    jobs = ["frozen:8:4:1.2"]
    replicas = Replicas(sql_url, record_dir, jobs)
    faults: list[Fault] = []
    stale: list[tuple[int, int, int]] = []
    try:
        replicas.start_many(3)
        t0 = time.time()
        last = t0
        for _ in range(2):
            run = start_of(record_dir, "frozen", last, {p.pid for p in replicas.alive()})
            pid = int(run["pid"])
            time.sleep(0.3)
            stopped_at = time.time()
            kill(pid, signal.SIGSTOP)
            time.sleep(2.5)
            kill(pid, signal.SIGCONT)
            faults.append(Fault("stop", stopped_at, time.time(), pid=pid))
            end = wait_for_record(
                record_dir,
                lambda r, pid=pid, run=run: (
                    r["event"] == "end" and r["pid"] == pid and r["slot"] == run["slot"]
                ),
                timeout=10,
            )
            assert end["outcome"] == "cancelled"
            stale.append((int(run["slot"]), int(run["fence"]), fence_of(sql_url, "frozen")))
            last = time.time()
        time.sleep(4.5)
        t1 = time.time() - 5
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    report = record_report(
        check(
            f"P3 {label(sql_url)} SIGSTOP owner 2.5s x2",
            history,
            specs(jobs),
            (t0, t1),
            tuple(faults),
        )
    )
    report.assert_guarantees()
    assert len(report.takeover_delays) == 2
    for slot, old_fence, current in stale:
        assert old_fence < current, "the woken owner's token is stale"
        accepted = [r for r in history.events("finish", "frozen") if r["slot"] == slot and r["ok"]]
        assert len(accepted) == 1, accepted


def test_pg_killed_and_restarted_keeps_its_state(
    pg: Any, record_dir: Path, record_report: Record
) -> None:
    """PostgreSQL SIGKILLed (every server process) for 3 s, then started again: nothing
    runs while it is away, every replica survives, slots resume, and since PostgreSQL
    recovers its data, fencing tokens keep increasing across the restart."""
    jobs = ["hb:1:0.05:2", "mid:2:0.5:2"]
    replicas = Replicas(pg.dsn, record_dir, jobs)
    try:
        replicas.start_many(2)
        replicas.start(offset=-0.4)
        replicas.start(offset=0.4)
        t0 = time.time() + 1
        time.sleep(4)
        fence_before = fence_of(pg.dsn, "hb")
        pg.kill()
        down = time.time()
        time.sleep(3)
        restarted = time.time()
        pg.start()
        up = time.time()
        time.sleep(8)
        assert len(replicas.alive()) == 4
        t1 = time.time() - 2
    finally:
        replicas.stop_all()
    history = History.read(record_dir)
    faults = (Fault("outage", down, up),)  # no "reset": the state survived
    report = record_report(
        check("P4 pg killed 3s, restarted", history, specs(jobs), (t0, t1), faults)
    )
    report.assert_guarantees()
    during = [r for r in history.events("start") if down + 0.05 < r["t"] < restarted]
    assert during == [], "fail closed: no run started while PostgreSQL was away"
    assert [r for r in history.events("error") if r["phase"] == "acquire"]
    after = [r["fence"] for r in history.events("start", "hb") if r["t"] > up]
    assert after
    assert min(after) > fence_before, "fences continue from the state PostgreSQL kept"


def test_pg_frozen_longer_than_the_lease(pg: Any, record_dir: Path, record_report: Record) -> None:
    """Every PostgreSQL process SIGSTOPped for 3 s while a 1.2 s lease runs: the owner
    cancels its run before PostgreSQL answers again, no overlap, work resumes."""
    jobs = ["work:8:4:1.2", "hb:1:0.05:2"]
    replicas = Replicas(pg.dsn, record_dir, jobs)
    try:
        replicas.start_many(3)
        t0 = time.time()
        run = start_of(record_dir, "work", t0, {p.pid for p in replicas.procs})
        time.sleep(0.3)
        pg.pause()
        paused = time.time()
        time.sleep(3)
        pg.resume()
        resumed = time.time()
        time.sleep(9)
        t1 = time.time() - 2
    finally:
        pg.resume()
        replicas.stop_all()
    history = History.read(record_dir)
    faults = (Fault("outage", paused, resumed),)
    report = record_report(check("P5 pg SIGSTOP 3s", history, specs(jobs), (t0, t1), faults))
    report.assert_guarantees()
    first = [
        r
        for r in history.events("end", "work")
        if r["slot"] == run["slot"] and r["pid"] == run["pid"]
    ]
    assert first
    assert first[0]["outcome"] == "cancelled"
    assert first[0]["t"] < resumed, "the owner gave up before PostgreSQL came back"


def test_pg_network_cut_between_the_owner_and_postgres(
    pg: Any, record_dir: Path, record_report: Record
) -> None:
    """The owner's network to PostgreSQL cut both ways for 3 s (lease 1.2 s), twice: another
    replica takes the slot over in time, the cut-off owner cancels its run, no overlap
    under valid leases, no slot finished twice."""
    jobs = ["work:8:4:1.2", "hb:1:0.05:2"]
    proxies = [TcpProxy((pg.host, pg.port)).start() for _ in range(3)]
    replicas = Replicas(pg.dsn, record_dir, jobs)
    faults: list[Fault] = []
    try:
        by_pid = {}
        for proxy in proxies:
            url = pg.dsn.replace(f":{pg.port}/", f":{proxy.port}/")
            by_pid[replicas.start(url=url).pid] = proxy
        t0 = time.time()
        last = t0
        for _ in range(2):
            run = wait_for_record(
                record_dir,
                lambda r, last=last: r["event"] == "start" and r["job"] == "work" and r["t"] > last,
                timeout=20,
            )
            time.sleep(0.3)
            proxy = by_pid[run["pid"]]
            proxy.partition()
            cut = time.time()
            time.sleep(3)
            proxy.heal()
            faults.append(Fault("stop", cut, time.time(), pid=run["pid"]))
            faults.append(Fault("outage", cut, time.time(), pid=run["pid"]))
            last = time.time()
        time.sleep(4)
        t1 = time.time() - 4
    finally:
        replicas.stop_all()
        for proxy in proxies:
            proxy.stop()
    history = History.read(record_dir)
    report = record_report(
        check("P6 pg network cut 3s x2", history, specs(jobs), (t0, t1), tuple(faults))
    )
    report.assert_guarantees()
    assert not report.dup_effects
    assert len(report.takeover_delays) == 2
    cancelled = [r for r in history.events("end", "work") if r["outcome"] == "cancelled"]
    assert len(cancelled) >= 2
