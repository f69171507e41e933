"""A runner's operations thread: wake-up events, the periodic sync, the heartbeat.

One daemon thread per started runner (started by ``start()``, never at import):

1. subscribes to the store's wake-up events, where [`Admin`][cronlock.admin.Admin]
   announces triggers and dynamic schedule changes, so replicas act within about a second;
2. every ``poll_interval`` (and after every (re)connection) runs `Operations.sync`,
   the fallback for anything an event missed (events are at most once: one sent while
   a runner is disconnected is lost): pending triggers, dynamic schedule changes, the
   job registry and the runner's heartbeat, in one round trip when idle. A store
   without events (`subscribe()` returns None) is served by this polling alone;
3. on a store error logs one WARNING per outage, waits (1 s, doubling to 5 s) and
   reconnects. Nothing it does can kill it: unexpected errors are logged and retried.

Events: ``{"type": "trigger", "key": KEY}``, ``{"type": "schedules"}``,
``{"type": "handover", "key": KEY, "slot": MS}``, ``{"type": "finished", "key": KEY,
"slot": MS}`` (a watched slot finished: its pending re-check is dropped),
``{"type": "wake"}`` (stop). None of this touches the scheduled claim path: a losing
claim still costs 1 round trip.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from typing import Any, Optional

from cronlock._registry import heartbeat_json, heartbeat_ttl, registry_entries
from cronlock.clock import monotonic
from cronlock.runner.dynamic import TaskRegistry
from cronlock.runner.host import RunnerHost
from cronlock.runner.jobs import JobTable
from cronlock.runner.scheduler import Scheduler
from cronlock.runner.triggers import Triggers
from cronlock.stores.base import Restorable
from cronlock.stores.types import Heartbeat, OperationalState, SyncReply

logger = logging.getLogger("cronlock")

RECONNECT_MIN_S = 1.0
RECONNECT_MAX_S = 5.0
# The registry entries are re-written this often even when nothing changed ("seen").
REGISTRY_REFRESH_S = 600.0


class Operations:
    """The operations side of one runner (see the module docstring).

    Args:
        host: the runner's shared services.
        scheduler: where handed-over slots are re-checked and triggered runs launched.
        jobs: the runner's jobs.
        tasks: its named handlers and dynamic jobs.
        poll_interval: seconds between syncs.
    """

    def __init__(
        self,
        host: RunnerHost,
        scheduler: Scheduler,
        jobs: JobTable,
        tasks: TaskRegistry,
        poll_interval: float,
    ) -> None:
        self.host = host
        self.scheduler = scheduler
        self.jobs = jobs
        self.tasks = tasks
        self.poll_interval = poll_interval
        self.triggers = Triggers(host, scheduler, jobs)
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._sync_lock = threading.Lock()
        self.listening = False  # subscribed right now
        self.last_sync: Optional[float] = None  # monotonic() of the last good sync
        self.started_ms = 0
        self._schedules_version: Optional[str] = None
        self._registered: Optional[dict[str, Any]] = None
        self._registered_at = 0.0
        self._registered_version = -1
        # What operators decided, as last read, to put back if the store forgets it.
        self._restorable = isinstance(host.store, Restorable)
        self._epoch = ""
        self._intent: Optional[OperationalState] = None
        self._intent_version: Optional[tuple[Optional[str], Optional[str]]] = None
        scheduler.before_first_claim = self.register_first

    # -- thread ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.started_ms = round(self.host.clock.time() * 1000)
        self._thread = threading.Thread(target=self._run, name="cronlock-ops", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and delete this runner's heartbeat (best effort)."""
        store = self.host.store
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            with contextlib.suppress(*store.errors):  # wake the listener; others ignore it
                store.publish({"type": "wake"})
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if thread is not None:
            with contextlib.suppress(*store.errors):
                store.delete_heartbeat(self.host.runner_id)

    @property
    def alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        store = self.host.store
        backoff = RECONNECT_MIN_S
        failing = False
        while not self._stop.is_set():
            try:
                self._listen()
                return
            except store.errors as error:
                if not failing:
                    logger.warning(
                        "cronlock: runner %s lost its store connection for operations "
                        "(triggers, schedules, heartbeat): %s; reconnecting",
                        self.host.runner_id,
                        error,
                    )
                    self.host.count("redis_errors")
                failing = True
            except Exception:  # the thread must never die
                logger.exception("cronlock: internal error in the operations thread")
            self.listening = False
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, RECONNECT_MAX_S)
            if failing and self._try_ping():
                backoff = RECONNECT_MIN_S

    def _try_ping(self) -> bool:
        store = self.host.store
        try:
            store.ping()
            return True
        except store.errors:
            return False

    def _listen(self) -> None:
        subscription = self.host.store.subscribe()
        try:
            self.listening = subscription is not None
            self._registered = None  # an empty store (restart) forgot the registry
            self.sync()  # catch up on whatever was sent while we were not listening
            logger.debug("cronlock: runner %s listening for operations", self.host.runner_id)
            next_sync = monotonic() + self.poll_interval
            while not self._stop.is_set():
                # Sleep until the next sync: stop() wakes us with an event, so no short
                # timeout is needed to notice it (idle cost stays near zero).
                timeout = max(0.0, next_sync - monotonic())
                if subscription is None:  # no events: polling alone
                    self._stop.wait(timeout)
                else:
                    event = subscription.get(timeout)
                    if event is not None:
                        self._handle(event)
                if monotonic() >= next_sync and not self._stop.is_set():
                    self.sync()
                    next_sync = monotonic() + self.poll_interval
        finally:
            self.listening = False
            if subscription is not None:
                subscription.close()

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "trigger":
            key = event.get("key")
            if isinstance(key, str) and self.triggers.has_job(key):
                self.triggers.run([key], inline=False)
        elif kind == "schedules":
            self.reconcile_schedules(force=True)
        elif kind in ("handover", "finished"):
            key, slot = event.get("key"), event.get("slot")
            if isinstance(key, str) and isinstance(slot, int):
                if kind == "handover":
                    self.scheduler.watch_now(key, slot)
                else:
                    self.scheduler.settled(key, slot)

    # -- the periodic sync ------------------------------------------------------------

    def sync(self, *, inline: bool = False) -> None:
        """One pass of the fallback checks; raises one of the store's errors when it is
        unreachable."""
        host = self.host
        with self._sync_lock:
            now_ms = round(host.clock.time() * 1000)
            heartbeat = None
            if self._thread is not None:
                heartbeat = Heartbeat(
                    host.runner_id, self._heartbeat(now_ms), heartbeat_ttl(self.poll_interval)
                )
            reply = host.store.sync(heartbeat)
            lost = self._restorable and bool(reply.epoch) and self._keep_intent(reply)
            # Just after a loss, another runner may still be restoring the schedules: keep
            # the dynamic jobs until the next sync rather than drop them meanwhile.
            if reply.schedules_version != self._schedules_version and not lost:
                self._reconcile(reply.schedules_version)
            self._register(now_ms)
            self.last_sync = monotonic()
        mine = sorted(k for k in reply.pending_triggers if self.triggers.has_job(k))
        if mine:
            host.store.clear_triggers(mine)
            self.triggers.run(mine, inline=inline)

    def _keep_intent(self, reply: SyncReply) -> bool:
        """Put back what operators decided when the store lost its state (a new epoch),
        and keep a fresh copy of it (re-read when its versions change); True when the
        state was found lost."""
        store = self.host.store
        assert isinstance(store, Restorable)
        lost = bool(self._epoch) and reply.epoch != self._epoch
        if lost:
            self._registered = None  # the registry is gone too: write it again
            if self._intent is not None:
                restored = store.restore(
                    reply.epoch, self._intent, self.host.holder, self.host.retention
                )
                if restored is not None:
                    logger.warning(
                        "cronlock: runner %s found the store's state lost (an empty restart?) "
                        "and restored %d operator decision(s): %s",
                        self.host.runner_id,
                        len(restored),
                        ", ".join(restored) or "none",
                    )
            self._intent_version = None  # read them again, restored
        self._epoch = reply.epoch
        version = (reply.operations_version, reply.schedules_version)
        if version != self._intent_version:
            self._intent = store.operational_state()
            self._intent_version = version
        return lost

    def _heartbeat(self, now_ms: int) -> str:
        host = self.host
        return heartbeat_json(
            runner_id=host.runner_id,
            holder=host.holder,
            jobs=self.jobs.all(),
            tasks=self.tasks.names(),
            started_ms=self.started_ms or now_ms,
            now_ms=now_ms,
            last_tick=host.stats.snapshot().last_tick,
        )

    def reconcile_schedules(self, *, force: bool = False) -> None:
        """Re-read the dynamic schedules (all of them) and apply any change."""
        with self._sync_lock:
            version = self.host.store.schedules_version()
            if force or version != self._schedules_version:
                self._reconcile(version)
                self._register(round(self.host.clock.time() * 1000))

    def _reconcile(self, version: Optional[str]) -> None:
        stored = self.host.store.schedules()
        if self.tasks.reconcile(stored):
            logger.info(
                "cronlock: runner %s now has %d dynamic schedule(s)",
                self.host.runner_id,
                len(stored),
            )
        self._schedules_version = version

    def register_first(self) -> None:
        """Write the registry before the scheduler's first claim, so a job new to the
        store is paused at once while pause-all is set; a failure is logged and left to
        the periodic sync (the claims then go ahead, as they would without it)."""
        try:
            with self._sync_lock:
                self._register(round(self.host.clock.time() * 1000))
        except Exception as error:  # the scheduler thread must go on
            logger.warning(
                "cronlock: runner %s could not register its jobs before its first claim: %s",
                self.host.runner_id,
                error,
            )

    def _register(self, now_ms: int) -> None:
        stale = monotonic() - self._registered_at > REGISTRY_REFRESH_S
        version = self.jobs.version
        if self._registered is not None and version == self._registered_version and not stale:
            return  # nothing added or removed: no O(jobs) work on the idle path
        entries = registry_entries(self.jobs.all(), self.tasks.task_of, now_ms)
        comparable = {k: json.loads(v) for k, v in entries.items()}
        for value in comparable.values():
            value.pop("seen")
        self._registered_version = version
        if comparable == self._registered and not stale:
            return
        self.host.store.register_jobs(entries)
        self._registered = comparable
        self._registered_at = monotonic()
