"""Read the records replica processes wrote, and check them against the promises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from cronlock.testing import wait_until
from tests import procs

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class History:
    """Every record of every replica, grouped for checking."""

    records: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, directory: Path) -> History:
        records = []
        for path in sorted(directory.glob("*.jsonl")):
            for line in path.read_text().splitlines():
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:  # a kill -9 can cut the last line
                        continue
        return cls(sorted(records, key=lambda r: r["t"]))

    def events(self, event: str, job: Optional[str] = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r["event"] == event and (job is None or r["job"] == job)]

    def starts_by_slot(self, job: str) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in self.events("start", job):
            out[r["slot"]].append(r)
        return dict(out)

    def completions_by_slot(self, job: str) -> dict[int, list[dict[str, Any]]]:
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in self.events("end", job):
            if r["outcome"] == "done":
                out[r["slot"]].append(r)
        return dict(out)


class Replicas:
    """Start and stop replica processes (``tests/replica.py``)."""

    def __init__(
        self,
        url: str,
        record_dir: Path,
        jobs: list[str],
        prefix: str = "replica-test",
        extra: tuple[str, ...] = (),
    ):
        self.url = url
        self.record_dir = record_dir
        self.jobs = jobs
        self.prefix = prefix
        self.extra = extra  # arguments every replica gets (topology, timeouts)
        self.procs: list[subprocess.Popen[str]] = []

    def start(
        self, offset: float = 0.0, extra: tuple[str, ...] = (), url: Optional[str] = None
    ) -> subprocess.Popen[str]:
        """Start one replica (``url`` overrides the shared one, e.g. a proxy's)."""
        proc = self.spawn(offset, extra, url)
        self.wait_ready([proc])
        return proc

    def start_many(self, count: int, extra: tuple[str, ...] = ()) -> list[subprocess.Popen[str]]:
        """Start ``count`` replicas at once (their imports overlap) and wait until all are ready."""
        procs = [self.spawn(0.0, extra) for _ in range(count)]
        self.wait_ready(procs)
        return procs

    def wait_ready(self, procs: list[subprocess.Popen[str]]) -> None:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"

    def spawn(
        self, offset: float = 0.0, extra: tuple[str, ...] = (), url: Optional[str] = None
    ) -> subprocess.Popen[str]:
        """Launch one replica without waiting for it to be ready."""
        args = [
            sys.executable,
            "-m",
            "tests.replica",
            url or self.url,
            "--record-dir",
            str(self.record_dir),
            *self.extra,
        ]
        args += ["--prefix", self.prefix, "--offset", str(offset), *extra]
        for job in self.jobs:
            args += ["--job", job]
        proc = procs.spawn(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        """SIGTERM every replica's process group, SIGKILL what is left after 15 s."""
        procs.end_all(self.procs, timeout=15)

    def alive(self) -> list[subprocess.Popen[str]]:
        return [p for p in self.procs if p.poll() is None]


def wait_for_record(directory: Path, predicate: Any, timeout: float = 30.0) -> dict[str, Any]:
    """The first record (in time order) matching ``predicate``, waiting for it to appear."""

    def find() -> Optional[dict[str, Any]]:
        return next((r for r in History.read(directory).records if predicate(r)), None)

    found: dict[str, Any] = wait_until(find, timeout=timeout, interval=0.05)
    return found


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    os.kill(pid, sig)
