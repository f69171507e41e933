"""``cronlock demo``: three replicas, two jobs, one kill -9, and the proof that it held.

The demo readies a store (`cronlock.cli._demo_store`: a private Redis/Valkey server, a
new SQLite file, or a given URL), then starts N replica processes (``python -m
cronlock.cli._demo_fleet replica NAME``, the store URL in ``$CRONLOCK_STORE_URL`` rather
than on a command line everyone can read) that register the same two jobs:

* ``short``: every 2 s, 0.2 s of work;
* ``long``: every 10 s, 4 s of work, a 3 s lease renewed every second.

Each replica reports every handler start and end as a JSON line on its stdout; the
demo prints them as they come, kills (SIGKILL) the replica running the first ``long``
slot, shows another replica taking that slot over as attempt 2, stops everything and
prints a summary. It exits 0 only if no slot ran twice and the takeover happened.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any, Optional

from cronlock.cli._common import CliError
from cronlock.cli._demo_store import PREFIX, DemoStore, prepared, replica_options
from cronlock.clock import SystemClock
from cronlock.context import JobContext
from cronlock.runner import CronRunner
from cronlock.schedules import IntervalSchedule
from cronlock.stores import from_url

JOBS = {
    # name: (interval s, work s, lease s)
    "short": (2.0, 0.2, 5.0),
    "long": (10.0, 4.0, 3.0),
}
KILL_AFTER_S = 1.0  # let the long job renew its lease once before the kill
READY_TIMEOUT_S = 30.0


# -- one replica ------------------------------------------------------------------------


def replica_main(name: str, url: str) -> int:
    """Run one replica on the store of ``url`` until SIGTERM, reporting runs as JSON lines
    on stdout."""
    lock = threading.Lock()

    def say(**fields: Any) -> None:
        fields.update(replica=name, pid=os.getpid(), t=time.time())
        with lock:
            sys.stdout.write(json.dumps(fields) + "\n")
            sys.stdout.flush()

    store = from_url(url, prefix=PREFIX, **replica_options(url))
    runner = CronRunner(store, prefix=PREFIX, clock=SystemClock())
    for job, (interval, work, lease) in JOBS.items():

        def handler(ctx: JobContext, job: str = job, work: float = work) -> None:
            say(event="start", job=job, slot=ctx.slot_ms, attempt=ctx.attempt)
            cancelled = ctx.cancelled.wait(work)
            say(event="end", job=job, slot=ctx.slot_ms, attempt=ctx.attempt, cancelled=cancelled)

        runner.add_job(handler, IntervalSchedule(interval), key=job, ttl=lease, catch_up=1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # stdin is a pipe from the demo: its end (the demo exited, even by kill -9) stops us
    threading.Thread(target=_stop_at_eof, args=(stop,), daemon=True).start()
    runner.start()
    say(event="ready")
    stop.wait()
    runner.stop(timeout=5)
    return 0


def _stop_at_eof(stop: threading.Event) -> None:
    sys.stdin.read()
    stop.set()


# -- the orchestrator -------------------------------------------------------------------


@dataclass
class Tally:
    """What the demo saw, for the live lines and the summary."""

    starts: dict[tuple[str, int], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    completions: Counter[tuple[str, int]] = field(default_factory=Counter)
    winners: Counter[str] = field(default_factory=Counter)
    killed: Optional[dict[str, Any]] = None  # the start record of the run we killed
    killed_at: float = 0.0
    takeover: Optional[dict[str, Any]] = None

    def duplicates(self) -> int:
        extra_done = sum(n - 1 for n in self.completions.values() if n > 1)
        repeated = 0
        for runs in self.starts.values():
            attempts = [r["attempt"] for r in runs]
            repeated += len(attempts) - len(set(attempts))
        return extra_done + repeated


def _hms(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).astimezone().strftime("%H:%M:%S")


def _reader(name: str, stream: IO[str], out: queue.Queue[dict[str, Any]]) -> None:
    for line in stream:
        try:
            out.put(json.loads(line))
        except json.JSONDecodeError:
            continue
    out.put({"event": "exit", "replica": name, "t": time.time()})


class Demo:
    """Starts the replicas, narrates, kills one, checks, summarises."""

    def __init__(self, url: str, replicas: int, duration: float, kill: bool, out: IO[str]) -> None:
        self.url = url
        self.count = replicas
        self.duration = duration
        self.kill = kill
        self.out = out
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.tally = Tally()

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def start_replicas(self) -> None:
        for i in range(1, self.count + 1):
            name = f"r{i}"
            proc = subprocess.Popen(
                [sys.executable, "-m", "cronlock.cli._demo_fleet", "replica", name],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
                env={**os.environ, "CRONLOCK_STORE_URL": self.url},
            )
            self.procs[name] = proc
            assert proc.stdout is not None
            threading.Thread(
                target=_reader, args=(name, proc.stdout, self.events), daemon=True
            ).start()

    def run(self) -> int:
        self.start_replicas()
        try:  # whatever happens here (a closed stdout, Ctrl-C), no replica outlives the demo
            self.wait_ready()
            self.watch()
        finally:
            self.stop_replicas()
        return self.summary()

    def wait_ready(self) -> None:
        ready = 0
        while ready < self.count:
            try:
                event = self.events.get(timeout=READY_TIMEOUT_S)
            except queue.Empty:
                raise CliError(f"replicas not ready within {READY_TIMEOUT_S:g} s") from None
            if event["event"] == "exit":
                status = self.procs[event["replica"]].wait()
                raise CliError(
                    f"replica {event['replica']} exited (status {status}) before it was ready; "
                    "its error is above"
                )
            ready += event["event"] == "ready"

    def watch(self) -> None:
        self.say(f"{self.count} replicas ready; watching for {self.duration:g} s\n")
        self.say(f"{'time':8}  {'job':5}  {'slot':8}  {'replica':7}  {'attempt':7}  event")
        end = time.time() + self.duration
        kill_due: Optional[float] = None
        while True:
            now = time.time()
            waiting_for_takeover = self.tally.killed is not None and self.tally.takeover is None
            if now >= end and not (waiting_for_takeover and now < self.tally.killed_at + 10):
                break
            if kill_due is not None and now >= kill_due:
                self.kill_owner()
                kill_due = None
            try:
                event = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            if (
                self.on_event(event)
                and self.kill
                and self.tally.killed is None
                and kill_due is None
            ):
                kill_due = time.time() + KILL_AFTER_S

    def on_event(self, e: dict[str, Any]) -> bool:
        """Print one event; True when it is the first ``long`` start (the one to kill)."""
        if e["event"] not in ("start", "end"):
            return False
        key = (e["job"], e["slot"])
        slot = _hms(e["slot"] / 1000)
        prefix = f"{_hms(e['t'])}  {e['job']:5}  {slot:8}  {e['replica']:7}  {e['attempt']:<7}"
        if e["event"] == "start":
            self.tally.starts[key].append(e)
            self.tally.winners[e["replica"]] += 1
            note = "started"
            killed = self.tally.killed
            if killed is not None and key == (killed["job"], killed["slot"]) and e["attempt"] > 1:
                self.tally.takeover = e
                note = f"took the slot over ({e['t'] - self.tally.killed_at:.2f} s after the kill)"
            self.say(f"{prefix}  {note}")
            return bool(e["job"] == "long" and e["attempt"] == 1)
        if not e["cancelled"]:
            self.tally.completions[key] += 1
        if e["job"] == "long" or e["cancelled"]:
            self.say(f"{prefix}  {'cancelled' if e['cancelled'] else 'finished'}")
        return False

    def kill_owner(self) -> None:
        starts = [r for runs in self.tally.starts.values() for r in runs if r["job"] == "long"]
        victim = starts[-1]
        proc = self.procs[victim["replica"]]
        if proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGKILL)
        self.tally.killed, self.tally.killed_at = victim, time.time()
        slot = _hms(victim["slot"] / 1000)
        self.say(
            f"{_hms(self.tally.killed_at)}  long   {slot:8}  {victim['replica']:7}  {'-':7}  "
            f"SIGKILL sent to {victim['replica']} (pid {proc.pid}) while it runs this slot"
        )

    def stop_replicas(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: a replica stops even if the signal was missed
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        while True:  # print what arrived while stopping
            try:
                self.on_event(self.events.get_nowait())
            except queue.Empty:
                break

    def summary(self) -> int:
        t = self.tally
        slots = Counter(job for job, _ in t.starts)
        dup = t.duplicates()
        self.say("\nSummary")
        self.say("  slots run:  " + ", ".join(f"{job} {n}" for job, n in sorted(slots.items())))
        self.say(
            "  runs per replica: " + ", ".join(f"{r} {n}" for r, n in sorted(t.winners.items()))
        )
        self.say(f"  duplicates: {dup}")
        ok = dup == 0
        if t.killed is None:
            self.say("  takeover:   no kill (--no-kill, or no long slot started in time)")
        elif t.takeover is None:
            self.say("  takeover:   NOT observed within 10 s of the kill")
            ok = False
        else:
            delay = t.takeover["t"] - t.killed_at
            lease = JOBS["long"][2]
            self.say(
                f"  takeover:   {t.takeover['replica']} ran slot {_hms(t.takeover['slot'] / 1000)} "
                f"as attempt {t.takeover['attempt']}, {delay:.2f} s after the kill "
                f"(bound: lease {lease:g} s + heartbeat {lease / 3:g} s)"
            )
        self.say("  result:     " + ("OK: every slot ran once" if ok else "FAILED"))
        return 0 if ok else 1


def run_demo(chosen: DemoStore, replicas: int, duration: float, kill: bool, out: IO[str]) -> int:
    """Run the demo on the store ``--store`` chose (see `cronlock.cli._demo_store`)."""
    with prepared(chosen, list(JOBS), out) as shared:
        for job, (interval, work, lease) in JOBS.items():
            out.write(
                f"  job {job:5}: every {interval:g} s, {work:g} s of work, lease {lease:g} s\n"
            )
        return Demo(shared, replicas, duration, kill, out).run()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cronlock.cli._demo_fleet")
    sub = parser.add_subparsers(dest="mode", required=True)
    rep = sub.add_parser("replica")
    rep.add_argument("name")
    args = parser.parse_args(argv)
    return replica_main(args.name, os.environ["CRONLOCK_STORE_URL"])


if __name__ == "__main__":
    sys.exit(main())
