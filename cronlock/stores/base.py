"""The `Store` protocol: everything the runner and the operator side need from shared state.

A store holds, for one prefix, each job's claim state (the latest slot, its status,
attempt, owner, lease and fence), its run history, pending manual runs, pause flags,
dynamic schedules and their version, the job registry and runner heartbeats; and it
carries wake-up events between replicas. [`RedisStore`][cronlock.stores.RedisStore] is
the implementation; another store implements this class and the job definitions do
not change.

What a store promises:

* **Claim, renew, finish, take a trigger are each atomic**, decided on the store's
  clock: a lease is valid while the store's clock says so, whatever the replicas'
  clocks say (see the time rule in [`cronlock.clock`][cronlock.clock]).
* **Batch forms cost one round trip**: `claim_slots` of many slots is one exchange
  with the store (the runner's tick pays one per node), `sync` reads the pending
  triggers and the schedules' version and writes the heartbeat in one.
* **Errors**: a call that could not reach the store raises one of `errors` (for Redis,
  redis-py's own `RedisError`, not re-wrapped); the runner then fails closed.
* **Wake-up events** are at most once: `publish` may be lost, so every consumer also
  polls (`sync` every `poll_interval`). A store without pub/sub returns None from
  `subscribe()`; the runner then relies on polling alone (triggers and schedule
  changes arrive within `poll_interval` instead of about a second).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Protocol, Union, runtime_checkable

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

__all__ = ["Restorable", "Store", "Subscription"]


class Subscription(Protocol):
    """Wake-up events as they arrive (decoded JSON objects)."""

    def get(self, timeout: float) -> Optional[dict[str, Any]]:
        """The next event within ``timeout`` seconds, else None; raises one of the
        store's `errors` when the connection is lost."""

    def close(self) -> None:
        """Stop listening (never raises)."""


class Store(Protocol):
    """Shared state of the runners of one prefix (see the module docstring)."""

    prefix: str
    #: What a call raises when the store cannot be reached or refuses it.
    errors: tuple[type[BaseException], ...]

    # -- the claim path (runner) --------------------------------------------------------

    def check_replication(self, replicas: int, timeout_ms: int) -> Optional[Replication]:
        """What claims wait for (``wait_replicas``); None for none. Raises
        ``ConfigurationError`` when this store cannot wait so (e.g. a cluster)."""

    def claim_slots(
        self, claims: Sequence[SlotClaim], replication: Optional[Replication] = None
    ) -> list[Union[ClaimReply, BaseException]]:
        """Claim every slot in one round trip; an error in place of a failed one's reply.
        Raises one of `errors` when none was sent."""

    def read_claims(self, claims: Sequence[SlotClaim]) -> list[Optional[ClaimReply]]:
        """The replies the stored states already give, read in one round trip, where the
        claim would write nothing (``taken``, ``done``, ``stale``, ``paused``); None where
        the claim must be sent. A store without cheap reads answers None for each.
        Raises one of `errors` when the read failed."""

    def state_location(self, key: str) -> str:
        """Where job ``key``'s state lives, for messages (e.g. ``"key 'P:job:{K}'"``)."""

    def renew(self, key: str, slot_ms: int, owner: str, lease_ms: int) -> Optional[int]:
        """Extend a running slot's lease; its new end (store ms), or None when lost."""

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
        """Record a run's end ("done", "failed" or "handover"); False when not ours.

        With ``replication`` (what `check_replication` returned), the finish waits for
        that many replicas as claims do, and raises
        [`FinishNotReplicated`][cronlock.errors.FinishNotReplicated] when fewer had it in
        time (the finish is recorded all the same). A store whose `check_replication`
        returns None is never given one; it may accept and ignore it.
        """

    def take_trigger(self, claim: TriggerClaim) -> TriggerReply:
        """Pop one pending manual run of ``claim.key`` and start it if allowed."""

    # -- operations (runner's operations thread) ---------------------------------------

    def sync(self, heartbeat: Optional[Heartbeat]) -> SyncReply:
        """One round trip: the jobs with pending triggers, the dynamic schedules'
        version, and (when given) this runner's heartbeat written."""

    def clear_triggers(self, keys: Sequence[str]) -> None:
        """Forget that ``keys`` have pending triggers (their requests stay queued)."""

    def schedules_version(self) -> Optional[str]:
        """The dynamic schedules' version (changes with every change); None: none yet."""

    def schedules(self) -> dict[str, str]:
        """Every dynamic schedule: id -> JSON spec."""

    def register_jobs(self, entries: Mapping[str, str]) -> list[str]:
        """Write registry entries (job key -> JSON); pause the new ones while pause-all
        is set. The keys that were new."""

    def delete_heartbeat(self, runner_id: str) -> None:
        """Remove a stopping runner's heartbeat."""

    def publish(self, event: Mapping[str, Any]) -> None:
        """Send a wake-up event to every subscribed runner (at most once)."""

    def subscribe(self) -> Optional[Subscription]:
        """Listen for wake-up events; None when this store has no pub/sub (poll)."""

    def ping(self) -> None:
        """One round trip; raises one of `errors` when the store does not answer."""

    def time_ms(self) -> int:
        """The store's clock (epoch ms): the clock leases are measured on."""

    # -- the operator side (Admin, the CLI, the Flask API) ------------------------------

    def registry(self) -> dict[str, str]:
        """Every registered job: key -> JSON entry."""

    def registry_entry(self, key: str) -> Optional[str]:
        """One job's registry entry, None when no runner registered it."""

    def job_states(self, keys: Sequence[str]) -> list[JobState]:
        """The stored state of each job of ``keys`` (one round trip)."""

    def history(self, key: str, limit: int) -> list[HistoryEntry]:
        """The latest ``limit`` history entries of job ``key``, newest first."""

    def heartbeats(self) -> list[tuple[str, Optional[float]]]:
        """Every live runner heartbeat: (JSON value, seconds until it lapses)."""

    def schedule_count(self) -> int:
        """How many dynamic schedules are stored."""

    def pause_all_active(self) -> bool:
        """Whether pause-all is in effect."""

    def forget(self, key: str) -> bool:
        """Drop a job's registry entry, state, history and triggers; True if any existed."""

    def pause(self, key: str) -> None:
        """Refuse claims of job ``key`` from now on (survives restarts)."""

    def resume(self, key: str) -> None:
        """Undo `pause`."""

    def pause_all(self, keys: Sequence[str]) -> None:
        """Pause ``keys`` and every job registered from now on."""

    def resume_all(self, keys: Sequence[str]) -> None:
        """End pause-all and resume ``keys``."""

    def queue_trigger(self, key: str, request: str, max_pending: int) -> None:
        """Queue a manual-run request of job ``key`` (keeping the latest ``max_pending``)
        and announce it."""

    def put_schedule(self, schedule_id: str, spec: str) -> None:
        """Store (or replace) a dynamic schedule, bump the version and announce it."""

    def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a dynamic schedule, bump the version and announce it; True if it existed."""


@runtime_checkable
class Restorable(Protocol):
    """A store that can lose its state (Redis restarted without persistence, an eviction).

    Its `Store.sync` reports an ``epoch`` that changes when the state was lost. Every
    runner keeps the operational state it last read (`operational_state`, re-read when
    ``operations_version`` or ``schedules_version`` changes); a runner that sees a new
    epoch puts it back with `restore`. A store that never forgets (SQL) need not
    implement this: its epoch stays "".
    """

    def operational_state(self) -> OperationalState:
        """The paused jobs, pause-all and the dynamic schedules (one round trip)."""

    def restore(
        self, epoch: str, state: OperationalState, holder: str, retention: Retention
    ) -> Optional[list[str]]:
        """Put back what ``state`` holds and the store lacks, once per ``epoch``.

        None when another runner already restores this epoch; else what was put back
        (``"paused:KEY"``, ``"pause-all"``, ``"schedule:ID"``), each also recorded as a
        ``restored`` entry in its job's history (kept as ``retention`` says).
        """
