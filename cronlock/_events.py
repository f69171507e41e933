"""A runner's operations thread: pub/sub notifications, the periodic sync, the heartbeat.

One daemon thread per started runner (started by ``start()``, never at import):

1. subscribes to ``P:events``, where [`cronlock.Admin`][cronlock.admin.Admin] announces triggers and
   dynamic schedule changes, so replicas act within about a second;
2. every ``poll_interval`` (and after every (re)connection) runs `Operations.sync`,
   the fallback for anything pub/sub missed (pub/sub is at-most-once: a message sent
   while a runner is disconnected is lost): pending triggers, dynamic schedule changes,
   the job registry and the runner's heartbeat, in one pipelined round trip when idle;
3. on a Redis error logs one WARNING per outage, waits (1 s, doubling to 5 s) and
   reconnects. Nothing it does can kill it: unexpected errors are logged and retried.

Messages are JSON: ``{"type": "trigger", "key": KEY}`` or ``{"type": "schedules"}``.
None of this touches the scheduled claim path: a losing claim still costs 1 round trip.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from redis.exceptions import RedisError

from cronlock import _claims
from cronlock._keys import (
    events_channel,
    job_key,
    pending_triggers_key,
    runner_key,
    schedules_key,
    schedules_version_key,
    trigger_key,
)
from cronlock._registry import heartbeat_json, register_jobs, registry_entries, write_heartbeat
from cronlock._run import Run
from cronlock._scripts import text
from cronlock.context import ErrorContext
from cronlock.errors import CorruptStateError
from cronlock.observers import notify
from cronlock.outcomes import RunKind, TriggerStatus

if TYPE_CHECKING:
    from cronlock.runner import CronRunner

logger = logging.getLogger("cronlock")

RECONNECT_MIN_S = 1.0
RECONNECT_MAX_S = 5.0
# The registry entries are re-written this often even when nothing changed ("seen").
REGISTRY_REFRESH_S = 600.0


class Operations:
    """The operations side of one runner (see the module docstring)."""

    def __init__(self, runner: CronRunner) -> None:
        self.runner = runner
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._sync_lock = threading.Lock()
        self._pubsub: Any = None
        self.listening = False  # subscribed right now
        self.last_sync: Optional[float] = None  # time.monotonic() of the last good sync
        self.started_ms = 0
        self._schedules_version: Optional[str] = None
        self._registered: Optional[dict[str, Any]] = None
        self._registered_at = 0.0
        self._registered_version = -1

    # -- thread ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.started_ms = round(self.runner.clock.time() * 1000)
        self._thread = threading.Thread(target=self._run, name="cronlock-ops", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and delete this runner's heartbeat (best effort)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            with contextlib.suppress(RedisError):  # wake the listener; others ignore it
                self.runner.client.publish(
                    events_channel(self.runner.prefix), json.dumps({"type": "wake"})
                )
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if thread is not None:
            with contextlib.suppress(RedisError):
                self.runner.client.delete(runner_key(self.runner.prefix, self.runner.runner_id))

    @property
    def alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        backoff = RECONNECT_MIN_S
        failing = False
        while not self._stop.is_set():
            try:
                self._listen()
                return
            except RedisError as error:
                if not failing:
                    logger.warning(
                        "cronlock: runner %s lost its Redis connection for operations "
                        "(triggers, schedules, heartbeat): %s; reconnecting",
                        self.runner.runner_id,
                        error,
                    )
                    self.runner._count("redis_errors")
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
        try:
            self.runner.client.ping()
            return True
        except RedisError:
            return False

    def _listen(self) -> None:
        runner = self.runner
        pubsub = runner.client.pubsub(ignore_subscribe_messages=True)
        self._pubsub = pubsub
        try:
            pubsub.subscribe(events_channel(runner.prefix))
            self.listening = True
            self._registered = None  # an empty Redis (restart) forgot the registry
            self.sync()  # catch up on whatever was sent while we were not listening
            logger.debug("cronlock: runner %s listening for operations", runner.runner_id)
            next_sync = time.monotonic() + runner.poll_interval
            while not self._stop.is_set():
                # Sleep until the next sync: stop() wakes us with a message, so no
                # short timeout is needed to notice it (idle cost stays near zero).
                timeout = max(0.0, next_sync - time.monotonic())
                message = pubsub.get_message(timeout=timeout)
                if message is not None and message.get("type") == "message":
                    self._handle(message.get("data"))
                if time.monotonic() >= next_sync:
                    self.sync()
                    next_sync = time.monotonic() + runner.poll_interval
        finally:
            self.listening = False
            self._pubsub = None
            # closing a broken connection may fail; it is gone either way
            with contextlib.suppress(Exception):
                pubsub.close()

    def _handle(self, data: Any) -> None:
        try:
            message = json.loads(text(data))
            kind = message.get("type")
        except (ValueError, AttributeError):
            logger.debug("cronlock: ignoring a message that is not ours: %r", data)
            return
        if kind == "trigger":
            key = message.get("key")
            if isinstance(key, str) and self._has_job(key):
                self.run_triggers([key], inline=False)
        elif kind == "schedules":
            self.reconcile_schedules(force=True)
        elif kind == "handover":
            key, slot = message.get("key"), message.get("slot")
            if isinstance(key, str) and isinstance(slot, int):
                self.runner._watch_now(key, slot)

    # -- the periodic sync ------------------------------------------------------------

    def sync(self, *, inline: bool = False) -> None:
        """One pass of the fallback checks; raises RedisError when Redis is unreachable."""
        runner = self.runner
        with self._sync_lock:
            now_ms = round(runner.clock.time() * 1000)
            pipe = runner.client.pipeline(transaction=False)
            pipe.smembers(pending_triggers_key(runner.prefix))
            pipe.get(schedules_version_key(runner.prefix))
            if self._thread is not None:
                write_heartbeat(
                    pipe,
                    runner.prefix,
                    runner.runner_id,
                    heartbeat_json(runner, self.started_ms or now_ms, now_ms),
                    runner.poll_interval,
                )
            replies = pipe.execute()
            pending = {text(k) for k in replies[0]}
            version = None if replies[1] is None else text(replies[1])
            if version != self._schedules_version:
                self._reconcile(version)
            self._register(now_ms)
            self.last_sync = time.monotonic()
        mine = sorted(k for k in pending if self._has_job(k))
        if mine:
            runner.client.srem(pending_triggers_key(runner.prefix), *mine)
            self.run_triggers(mine, inline=inline)

    def reconcile_schedules(self, *, force: bool = False) -> None:
        """Re-read the dynamic schedules (all of them) and apply any change."""
        with self._sync_lock:
            raw = self.runner.client.get(schedules_version_key(self.runner.prefix))
            version = None if raw is None else text(raw)
            if force or version != self._schedules_version:
                self._reconcile(version)
                self._register(round(self.runner.clock.time() * 1000))

    def _reconcile(self, version: Optional[str]) -> None:
        runner = self.runner
        raw = runner.client.hgetall(schedules_key(runner.prefix))
        stored = {text(k): text(v) for k, v in raw.items()}
        if runner.tasks.reconcile(runner, stored):
            logger.info(
                "cronlock: runner %s now has %d dynamic schedule(s)",
                runner.runner_id,
                len(stored),
            )
        self._schedules_version = version

    def _register(self, now_ms: int) -> None:
        runner = self.runner
        stale = time.monotonic() - self._registered_at > REGISTRY_REFRESH_S
        version = runner.jobs_version
        if self._registered is not None and version == self._registered_version and not stale:
            return  # nothing added or removed: no O(jobs) work on the idle path
        entries = registry_entries(runner, now_ms)
        comparable = {k: json.loads(v) for k, v in entries.items()}
        for value in comparable.values():
            value.pop("seen")
        self._registered_version = version
        if comparable == self._registered and not stale:
            return
        register_jobs(runner.client, runner.prefix, entries)
        self._registered = comparable
        self._registered_at = time.monotonic()

    # -- triggers ---------------------------------------------------------------------

    def _has_job(self, key: str) -> bool:
        try:
            job = self.runner.job(key)
        except KeyError:
            return False
        return job.enabled

    def run_triggers(self, keys: list[str], *, inline: bool) -> int:
        """Start every pending manual run of ``keys`` this runner wins; how many started."""
        runner = self.runner
        started = 0
        for key in keys:
            while not runner._stopping:
                try:
                    job = runner.job(key)
                except KeyError:
                    break
                owner = secrets.token_hex(8)
                sent_at = time.monotonic()  # leases run on real time, as in _scheduler
                try:
                    reply = _claims.trigger(
                        runner.client,
                        job_key(runner.prefix, key),
                        trigger_key(runner.prefix, key),
                        owner=owner,
                        lease_ms=job.options.ttl_ms,
                        overlap=job.options.overlap,
                        holder=runner.holder,
                        history=runner._history(key),
                    )
                except RedisError as error:
                    runner._count("redis_errors")
                    runner._report(error, ErrorContext(key, "acquire"))
                    break
                if reply.status == TriggerStatus.CORRUPT:
                    runner._report(
                        CorruptStateError(
                            f"state of job {key!r} is not cronlock's ({reply.trigger_id})"
                        ),
                        ErrorContext(key, "acquire"),
                    )
                    break
                if reply.status == TriggerStatus.NONE:
                    break
                if reply.status != TriggerStatus.WON:
                    logger.info(
                        "cronlock: trigger %s of job %r dropped: %s",
                        reply.trigger_id,
                        key,
                        "the job is paused"
                        if reply.status == TriggerStatus.PAUSED
                        else "a run is still going (overlap skip; use force)",
                    )
                    continue
                started += self._launch(job, owner, reply, sent_at, inline)
        return started

    def _launch(
        self, job: Any, owner: str, reply: _claims.TriggerReply, sent_at: float, inline: bool
    ) -> int:
        runner = self.runner
        runner._count("claims_won")
        logger.info(
            "cronlock: running job %r now (trigger %s, fence %d)",
            job.key,
            reply.trigger_id,
            reply.fence,
        )
        if runner.observers:
            notify(
                runner.observers, "claimed", job.key, reply.slot_ms, _claims.WON, runner.runner_id
            )
        run = Run(
            runner,
            job,
            state_key=job_key(runner.prefix, job.key),
            owner=owner,
            reply=_claims.ClaimReply(
                _claims.WON, attempt=1, fence=reply.fence, lease_until_ms=reply.lease_until_ms
            ),
            sent_at=sent_at,
            slot_ms=reply.slot_ms,
            kind=RunKind.MANUAL,
        )
        return runner._launch(run, inline)
