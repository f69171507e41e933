"""Fixtures of the fault suite: private servers, a scenario harness, the results table.

Every scenario appends its row to one table, printed at the end of the session (visible
with ``pytest -s``) and written to ``test-artifacts/faults-table.txt``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from cronlock.testing import RedisServer
from tests.faults.checker import Report
from tests.history import ROOT


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: fault-injection scenario (processes, servers)")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Scenarios that add a row to the table run in one xdist worker, so one table holds all.

    The group is the slow suite's (see ``tests/conftest.py``), which runs in one worker.
    """
    for item in items:
        if "fault_table" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slow"))


ARTIFACT = ROOT / "test-artifacts" / "faults-table.txt"
_rows: list[Report] = []


def table_text(rows: list[Report]) -> str:
    lines = [Report.header()]
    lines += [r.row() for r in rows]
    lines.append("")
    lines.append(
        "slots: grid slots in the checked window; runs: handler calls; done: slots whose "
        "finish Redis accepted; dup: slots finished twice; dupfx: handlers that ran to the "
        "end twice (stale owner, lease already lost); ovl: overlaps under valid leases; "
        "miss: slots with no run and no explanation; expl: slots explained (outage, busy, "
        "dead owner); tkov: runs with attempt > 1; p50/p99/max: takeover delay after an "
        "owner's death; bound: ttl + ttl/3 + margin; cancel: how late (max) a cancelled run "
        "noticed its lease had ended; recov: from the end of an outage to the first run."
    )
    for r in rows:
        extra = [f"explained {dict(r.explained)}"] if r.explained else []
        extra += r.notes[:5]
        if extra:
            lines.append(f"{r.scenario}: " + "; ".join(extra))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def fault_table() -> Iterator[list[Report]]:
    """The rows of this session's table; written out when the session ends."""
    yield _rows
    if _rows:
        text = table_text(_rows)
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(text)
        print("\n\nfault-injection results\n" + text)


@pytest.fixture
def record_report(fault_table: list[Report]) -> Callable[[Report], Report]:
    """Add a scenario's report to the table (and print its row)."""

    def add(report: Report) -> Report:
        fault_table.append(report)
        print("\n" + Report.header() + "\n" + report.row())
        for note in report.notes[:5]:
            print("  note:", note)
        return report

    return add


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    """A private server for one scenario."""
    return server_factory()


@pytest.fixture
def pg(pg_server: Any) -> Iterator[Any]:
    """A private PostgreSQL for one scenario (it may be killed, frozen, restarted).

    Asks for the session's ``pg_server`` first, so a machine without the binaries
    skips (or, under ``CI=true``, fails) the same way."""
    from tests.pgserver import PostgresServer

    server = PostgresServer(pg_server.bin_dir)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def record_dir(tmp_path: Path) -> Path:
    path = tmp_path / "records"
    path.mkdir()
    return path
