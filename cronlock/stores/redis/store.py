"""`RedisStore`: the [`Store`][cronlock.stores.Store] on Redis (also Valkey, Sentinel, Cluster).

Every key of the runner and the operator side is named in `cronlock._keys`
and every Lua script is called through `claims`; this class
is the only place that sends them. Costs are those of the scripts and pipelines behind
each method: a claim of many slots is one pipeline (one round trip per node), a renew or
a finish one `EVALSHA` (with ``replication``, the claims and the finish each end their
pipeline with a `WAIT`), a sync one pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from redis.cluster import RedisCluster
from redis.exceptions import RedisError

from cronlock._keys import (
    events_channel,
    history_key,
    job_key,
    job_registry_key,
    pause_all_key,
    pending_triggers_key,
    runner_key,
    schedules_key,
    schedules_version_key,
    trigger_key,
)
from cronlock._scripts import text
from cronlock._validate import check_client, check_prefix
from cronlock.errors import ConfigurationError, FinishNotReplicated
from cronlock.stores.base import Subscription
from cronlock.stores.coalesce import Coalescer
from cronlock.stores.redis import claims as _claims
from cronlock.stores.redis import intent, probe, scans
from cronlock.stores.redis.events import PubSub, finished_event
from cronlock.stores.redis.history import parse_entry
from cronlock.stores.types import (
    ClaimReply,
    FinishInfo,
    Heartbeat,
    HistoryEntry,
    JobState,
    OperationalState,
    Replication,
    Retention,
    SlotClaim,
    SyncReply,
    TriggerClaim,
    TriggerReply,
)

__all__ = ["RedisStore"]


class RedisStore:
    """Shared state of one prefix in Redis.

    Args:
        client: a redis-py client (``redis.Redis``, a Sentinel master, or
            ``RedisCluster``), responses decoded or not. Give it a ``socket_timeout``:
            a Redis that stops answering otherwise blocks its caller until it answers.
        prefix: namespace of every key; replicas of one app must share it.
    """

    errors: tuple[type[BaseException], ...] = (RedisError,)

    def __init__(self, client: Any, prefix: str = "cronlock") -> None:
        self.client = check_client(client)
        self.prefix = check_prefix(prefix)
        self._events = events_channel(self.prefix)
        # Finishes of runs ending together share a round trip (see Coalescer).
        self._finishes: Coalescer[_claims.Call] = Coalescer(
            lambda calls: _claims.finish_many(self.client, calls)
        )

    # -- the claim path ---------------------------------------------------------------

    def check_replication(self, replicas: int, timeout_ms: int) -> Optional[Replication]:
        if not replicas:
            return None
        if isinstance(self.client, RedisCluster):
            raise ConfigurationError(
                f"wait_replicas={replicas} is not available with RedisCluster (a claim and "
                "its WAIT must share one connection, which cluster pipelines do not give)"
            )
        pool = getattr(self.client, "connection_pool", None)
        socket_timeout = getattr(pool, "connection_kwargs", {}).get("socket_timeout")
        if isinstance(socket_timeout, (int, float)) and socket_timeout * 1000 <= timeout_ms:
            raise ConfigurationError(
                f"wait_timeout ({timeout_ms / 1000:g} s) must be shorter than the client's "
                f"socket_timeout ({socket_timeout:g} s): the claim's reply waits for the WAIT"
            )
        return Replication(replicas, timeout_ms)

    def _claim_call(self, claim: SlotClaim) -> _claims.Call:
        state = job_key(self.prefix, claim.key)
        args: list[Any] = [
            claim.slot_ms,
            claim.owner,
            claim.lease_ms,
            claim.max_attempts,
            claim.overlap,
            claim.holder,
        ]
        kept = claim.retention
        tail: tuple[int, ...] = ()
        if claim.recheck or claim.wake:
            tail = (1 if claim.recheck else 0, *((1,) if claim.wake else ()))
        if not kept.max_entries:
            return [state], [*args, 0, 0, *tail] if tail else args
        return [state, history_key(self.prefix, claim.key)], [
            *args,
            kept.max_entries,
            kept.max_age_ms,
            *tail,
        ]

    def claim_slots(
        self, claims: Sequence[SlotClaim], replication: Optional[Replication] = None
    ) -> list[Union[ClaimReply, BaseException]]:
        calls = [self._claim_call(claim) for claim in claims]
        if len(calls) == 1:
            return [_claims.claim_call(self.client, calls[0], replication)]
        return _claims.claim_calls(self.client, calls, replication)

    def read_claims(self, claims: Sequence[SlotClaim]) -> list[Optional[ClaimReply]]:
        """Each job's state read with one ``HMGET``, and ``TIME``, in one round trip
        (`probe`). Not on a cluster: each node has its own clock there."""
        if not claims or isinstance(self.client, RedisCluster):
            return [None] * len(claims)
        keys = [job_key(self.prefix, claim.key) for claim in claims]
        now_ms, states = probe.read_states(self.client, keys)
        return [probe.answer(claim, state, now_ms) for claim, state in zip(claims, states)]

    def state_location(self, key: str) -> str:
        return f"key {job_key(self.prefix, key)!r}"

    def renew(self, key: str, slot_ms: int, owner: str, lease_ms: int) -> Optional[int]:
        return _claims.renew(self.client, job_key(self.prefix, key), slot_ms, owner, lease_ms)

    def _history(self, key: str, retention: Retention) -> _claims.HistoryOptions:
        if not retention.max_entries:
            return _claims.NO_HISTORY
        return _claims.HistoryOptions(
            history_key(self.prefix, key), retention.max_entries, retention.max_age_ms
        )

    def finish(
        self,
        key: str,
        slot_ms: int,
        owner: str,
        outcome: str,
        *,
        retention: Retention,
        info: FinishInfo,
        replication: Optional[Replication] = None,
    ) -> bool:
        call = _claims.finish_call(
            job_key(self.prefix, key),
            slot_ms,
            owner,
            outcome,
            history=self._history(key, retention),
            info=info,
            wake=(self._events, finished_event(key, slot_ms)),
        )
        if replication is None:
            return bool(self._finishes.call(call))
        ok, acked = _claims.finish_waited(self.client, call, replication)
        if ok and acked < replication.replicas:
            raise FinishNotReplicated(key, slot_ms, acked, replication.replicas)
        return ok

    def take_trigger(self, claim: TriggerClaim) -> TriggerReply:
        # The history stream is named even when history is off: the script always lists it
        # as a key, so Redis Cluster routes the call by its hash tag.
        history = _claims.HistoryOptions(
            history_key(self.prefix, claim.key),
            claim.retention.max_entries,
            claim.retention.max_age_ms,
        )
        return _claims.trigger(
            self.client,
            job_key(self.prefix, claim.key),
            trigger_key(self.prefix, claim.key),
            owner=claim.owner,
            lease_ms=claim.lease_ms,
            overlap=claim.overlap,
            holder=claim.holder,
            history=history,
        )

    # -- operations ---------------------------------------------------------------------

    def sync(self, heartbeat: Optional[Heartbeat]) -> SyncReply:
        pipe = self.client.pipeline(transaction=False)
        pipe.smembers(pending_triggers_key(self.prefix))
        pipe.get(schedules_version_key(self.prefix))
        intent.queue_epoch(pipe, self.prefix)
        if heartbeat is not None:
            key = runner_key(self.prefix, heartbeat.runner_id)
            pipe.set(key, heartbeat.value, ex=heartbeat.ttl_s)
        replies = pipe.execute()
        return SyncReply(
            pending_triggers=frozenset(text(k) for k in replies[0]),
            schedules_version=None if replies[1] is None else text(replies[1]),
            epoch=text(replies[3]),
            operations_version=None if replies[4] is None else text(replies[4]),
        )

    def operational_state(self) -> OperationalState:
        return intent.operational_state(self.client, self.prefix)

    def restore(
        self, epoch: str, state: OperationalState, holder: str, retention: Retention
    ) -> Optional[list[str]]:
        return intent.restore(
            self.client, self.prefix, epoch, state, holder=holder, retention=retention
        )

    def clear_triggers(self, keys: Sequence[str]) -> None:
        if keys:
            self.client.srem(pending_triggers_key(self.prefix), *keys)

    def schedules_version(self) -> Optional[str]:
        raw = self.client.get(schedules_version_key(self.prefix))
        return None if raw is None else text(raw)

    def schedules(self) -> dict[str, str]:
        return _decode(self.client.hgetall(schedules_key(self.prefix)))

    def register_jobs(self, entries: Mapping[str, str]) -> list[str]:
        """Two round trips (three when pause-all is set and a job is new)."""
        if not entries:
            return []
        registry = job_registry_key(self.prefix)
        pipe = self.client.pipeline(transaction=False)
        keys = sorted(entries)
        for key in keys:
            pipe.hsetnx(registry, key, entries[key])
        pipe.hset(registry, mapping=dict(entries))
        pipe.get(pause_all_key(self.prefix))
        replies = pipe.execute()
        new = [key for key, created in zip(keys, replies) if created]
        if new and replies[-1] is not None:
            pipe = self.client.pipeline(transaction=False)
            for key in new:
                pipe.hset(job_key(self.prefix, key), "paused", "1")
            intent.paused_changes(pipe, self.prefix, paused=new, resumed=())
            pipe.execute()
        return new

    def delete_heartbeat(self, runner_id: str) -> None:
        self.client.delete(runner_key(self.prefix, runner_id))

    def publish(self, event: Mapping[str, Any]) -> None:
        self.client.publish(self._events, json.dumps(dict(event)))

    def subscribe(self) -> Subscription:
        return PubSub(self.client, self._events)

    def ping(self) -> None:
        self.client.ping()

    def time_ms(self) -> int:
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # -- the operator side ------------------------------------------------------------

    def registry(self) -> dict[str, str]:
        return _decode(self.client.hgetall(job_registry_key(self.prefix)))

    def registry_entry(self, key: str) -> Optional[str]:
        raw = self.client.hget(job_registry_key(self.prefix), key)
        return None if raw is None else text(raw)

    def job_states(self, keys: Sequence[str]) -> list[JobState]:
        if not keys:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(job_key(self.prefix, key))
            pipe.llen(trigger_key(self.prefix, key))
        replies = pipe.execute()
        return [
            JobState(_decode(state), int(pending))
            for state, pending in zip(replies[::2], replies[1::2])
        ]

    def history(self, key: str, limit: int) -> list[HistoryEntry]:
        rows = self.client.xrevrange(history_key(self.prefix, key), count=limit)
        return [parse_entry(key, entry_id, raw) for entry_id, raw in rows]

    def heartbeats(self) -> list[tuple[str, Optional[float]]]:
        return scans.heartbeats(self.client, self.prefix)

    def prefixes_with_runners(self) -> dict[str, int]:
        """Prefixes with live runners in this database (any prefix), and how many each
        has; bounded (see `cronlock.stores.redis.scans`)."""
        return scans.prefixes_with_runners(self.client)

    def schedule_count(self) -> int:
        return int(self.client.hlen(schedules_key(self.prefix)))

    def pause_all_active(self) -> bool:
        return bool(self.client.exists(pause_all_key(self.prefix)))

    def forget(self, key: str) -> bool:
        pipe = self.client.pipeline(transaction=False)
        pipe.hdel(job_registry_key(self.prefix), key)
        pipe.delete(job_key(self.prefix, key))
        pipe.delete(history_key(self.prefix, key))
        pipe.delete(trigger_key(self.prefix, key))
        intent.paused_changes(pipe, self.prefix, paused=(), resumed=(key,))
        return any(pipe.execute()[:4])

    def pause(self, key: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(job_key(self.prefix, key), "paused", "1")
        intent.paused_changes(pipe, self.prefix, paused=(key,), resumed=())
        pipe.execute()

    def resume(self, key: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.hdel(job_key(self.prefix, key), "paused")
        intent.paused_changes(pipe, self.prefix, paused=(), resumed=(key,))
        pipe.execute()

    def pause_all(self, keys: Sequence[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.set(pause_all_key(self.prefix), "1")
        for key in keys:
            pipe.hset(job_key(self.prefix, key), "paused", "1")
        intent.paused_changes(pipe, self.prefix, paused=keys, resumed=())
        pipe.execute()

    def resume_all(self, keys: Sequence[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(pause_all_key(self.prefix))
        for key in keys:
            pipe.hdel(job_key(self.prefix, key), "paused")
        intent.paused_changes(pipe, self.prefix, paused=(), resumed=keys)
        pipe.execute()

    def queue_trigger(self, key: str, request: str, max_pending: int) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(trigger_key(self.prefix, key), request)
        pipe.ltrim(trigger_key(self.prefix, key), -max_pending, -1)
        pipe.sadd(pending_triggers_key(self.prefix), key)
        self._announcing(pipe, {"type": "trigger", "key": key})

    def put_schedule(self, schedule_id: str, spec: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(schedules_key(self.prefix), schedule_id, spec)
        pipe.incr(schedules_version_key(self.prefix))
        self._announcing(pipe, {"type": "schedules"})

    def remove_schedule(self, schedule_id: str) -> bool:
        pipe = self.client.pipeline(transaction=False)
        pipe.hdel(schedules_key(self.prefix), schedule_id)
        pipe.incr(schedules_version_key(self.prefix))
        return bool(self._announcing(pipe, {"type": "schedules"})[0])

    def _announcing(self, pipe: Any, event: Mapping[str, Any]) -> list[Any]:
        """Run ``pipe`` with ``event`` published after its commands: in the same round
        trip, or on a Cluster (whose pipelines refuse PUBLISH) in one more."""
        if isinstance(self.client, RedisCluster):
            replies: list[Any] = pipe.execute()
            self.publish(event)
            return replies
        pipe.publish(self._events, json.dumps(dict(event)))
        return list(pipe.execute()[:-1])

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self.prefix!r})"


def _decode(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {text(k): text(v) for k, v in raw.items()}
