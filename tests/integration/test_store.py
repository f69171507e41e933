"""The store seam: RedisStore's typed replies, and runners and Admin built on a store."""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest
import redis

from cronlock import Admin, CronRunner, FakeClock
from cronlock.errors import ConfigurationError
from cronlock.stores import ClaimReply, ClaimStatus, RedisStore, TriggerStatus, as_store
from cronlock.stores.base import Subscription
from cronlock.stores.types import FinishInfo, Retention, SlotClaim, TriggerClaim
from cronlock.testing import wait_until

T0 = 1_800_000_000.0


def slot(key: str, owner: str, slot_ms: int = 1_000, lease_ms: int = 30_000) -> SlotClaim:
    return SlotClaim(key, slot_ms, owner, lease_ms, 3, "skip", "host:1:abc", Retention(10, 0))


def test_claims_of_many_slots_answer_in_order_with_typed_replies(client: redis.Redis) -> None:
    """One claim_slots call: a win, then a loss for the same slot, each a ClaimReply."""
    store = RedisStore(client, prefix="st1")
    won, taken = store.claim_slots([slot("a", "me"), slot("a", "other")])
    assert isinstance(won, ClaimReply)
    assert isinstance(taken, ClaimReply)
    assert won.status is ClaimStatus.WON
    assert won.status == "won"
    assert f"{won.status}" == "won"
    assert taken.status is ClaimStatus.TAKEN
    assert taken.lease_until_ms == won.lease_until_ms


def test_renew_and_finish_act_only_for_the_owner(client: redis.Redis) -> None:
    """A stranger's renew and finish change nothing; the owner's go through."""
    store = RedisStore(client, prefix="st2")
    [won] = store.claim_slots([slot("a", "me")])
    assert isinstance(won, ClaimReply)
    assert store.renew("a", 1_000, "stranger", 30_000) is None
    assert store.renew("a", 1_000, "me", 30_000) is not None
    info = FinishInfo(attempt=1, fence=won.fence, holder="host:1:abc")
    assert not store.finish("a", 1_000, "stranger", "done", retention=Retention(10, 0), info=info)
    assert store.finish("a", 1_000, "me", "done", retention=Retention(10, 0), info=info)
    events = [entry.event for entry in store.history("a", 10)]
    assert events == ["succeeded", "running"]


def test_take_trigger_answers_none_when_nothing_is_pending(client: redis.Redis) -> None:
    """No pending request: the typed reply says so."""
    store = RedisStore(client, prefix="st3")
    reply = store.take_trigger(TriggerClaim("a", "me", 30_000, "skip", "host:1:abc"))
    assert reply.status is TriggerStatus.NONE


def test_events_reach_a_subscriber(client: redis.Redis) -> None:
    """publish() reaches subscribe(), decoded; messages that are not JSON are skipped."""
    store = RedisStore(client, prefix="st4")
    subscription = store.subscribe()
    try:
        client.publish("st4:events", "not json")
        store.publish({"type": "wake"})
        got = None
        for _ in range(50):
            got = subscription.get(0.1)
            if got is not None:
                break
        assert got == {"type": "wake"}
    finally:
        subscription.close()


def test_a_runner_and_an_admin_take_a_store_or_a_client(client: redis.Redis) -> None:
    """A store keeps its prefix; a client becomes a RedisStore; a mismatch is refused."""
    store = RedisStore(client, prefix="st5")
    assert CronRunner(store).prefix == "st5"
    assert CronRunner(store).client is client
    assert isinstance(CronRunner(client, prefix="st5").store, RedisStore)
    assert Admin(store).prefix == "st5"
    assert as_store(store) is store
    with pytest.raises(ConfigurationError, match="prefix"):
        CronRunner(store, prefix="other")


class PollingOnlyStore(RedisStore):
    """A store without events: the runner must find triggers by polling alone."""

    def subscribe(self) -> Optional[Subscription]:  # type: ignore[override]
        return None


def test_a_store_without_events_is_served_by_polling(client: redis.Redis) -> None:
    """With subscribe() None, a trigger still runs, found by the periodic sync."""
    store = PollingOnlyStore(client, prefix="st6")
    ran = threading.Event()
    runner = CronRunner(store, clock=FakeClock(T0), poll_interval=0.2)

    @runner.interval(seconds=3600, key="job")
    def job() -> None:
        ran.set()

    runner.start()
    try:
        wait_until(lambda: "job" in store.registry() and Admin(store).runners(), timeout=10)
        # registered, not only alive: a trigger of a job not yet registered is refused
        Admin(store).trigger("job")
        assert ran.wait(10)
        assert not runner.health().listening
    finally:
        runner.stop(timeout=5)


def test_the_store_clock_is_the_servers(client: redis.Redis) -> None:
    """time_ms() reads the server's TIME (leases are measured on it)."""
    seconds, micros = client.time()
    server_ms: Any = int(seconds) * 1000 + int(micros) // 1000
    assert abs(RedisStore(client).time_ms() - server_ms) < 5_000
