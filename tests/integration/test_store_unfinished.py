"""Every store records runs that ended without a finish, and a re-check never starts a slot.

The same scenarios on each store kind (``store`` fixture): the Lua scripts on Redis,
``cronlock.stores.sql.machine`` on the SQL stores. Leases are a few ms on the store's
clock; the tests wait for them to lapse on that clock.
"""

from __future__ import annotations

from dataclasses import replace

from cronlock.stores import ClaimReply, ClaimStatus, Store
from cronlock.stores.types import FinishInfo, Retention, SlotClaim, TriggerClaim
from cronlock.testing import wait_until

KEEP = Retention(50, 0)


def _claim(store: Store, slot_ms: int, owner: str, lease_ms: int, **kw: object) -> ClaimReply:
    overlap = str(kw.pop("overlap", "skip"))
    request = SlotClaim("job", slot_ms, owner, lease_ms, 3, overlap, f"h:{owner}", KEEP)
    [reply] = store.claim_slots([replace(request, **kw)])  # type: ignore[arg-type]
    assert isinstance(reply, ClaimReply), reply
    return reply


def _lapse(store: Store, until_ms: int) -> None:
    wait_until(lambda: store.time_ms() > until_ms, timeout=5)


def _state(store: Store) -> dict[str, str]:
    return dict(store.job_states(["job"])[0].fields)


def test_a_recheck_never_starts_a_slot_whose_state_is_gone(store: Store) -> None:
    """No state (an empty restart forgot it): a re-check answers gone and writes nothing;
    an ordinary claim of the same slot still wins."""
    assert _claim(store, 1_000, "me", 5_000, recheck=True).status is ClaimStatus.GONE
    assert _state(store) == {}
    assert _claim(store, 1_000, "me", 5_000).status is ClaimStatus.WON


def test_a_recheck_still_takes_a_lapsed_lease_over(store: Store) -> None:
    """The re-check's purpose is kept: a lapsed lease of the same slot is attempt 2."""
    first = _claim(store, 1_000, "dead", 5)
    _lapse(store, first.lease_until_ms)
    again = _claim(store, 1_000, "me", 5_000, recheck=True)
    assert (again.status, again.attempt) == (ClaimStatus.WON, 2)


def test_a_recheck_of_a_slot_newer_than_the_state_is_gone(store: Store) -> None:
    """Told slot 2000 was running, the state names slot 1000: it was lost and rewritten."""
    _claim(store, 1_000, "other", 5_000)
    assert _claim(store, 2_000, "me", 5_000, recheck=True).status is ClaimStatus.GONE
    assert _state(store)["slot"] == "1000"


def test_lapsed_older_runs_are_recorded_as_ended_by_the_next_claim(store: Store) -> None:
    """overlap "allow": the crashed older run is ``abandoned``; the latest run that never
    finished is ``expired``; both are failures and both come back in the reply."""
    dead = _claim(store, 1_000, "dead", 300, overlap="allow")
    moved = _claim(store, 2_000, "second", 300, overlap="allow")  # "dead" moves aside
    assert moved.ended == ()
    _lapse(store, max(dead.lease_until_ms, moved.lease_until_ms))
    third = _claim(store, 3_000, "me", 5_000, overlap="allow")
    assert third.status is ClaimStatus.WON
    assert sorted(third.ended) == [(1_000, 1), (2_000, 1)]
    state = _state(store)
    assert state["failures"] == "2"
    assert not [f for f in state if f.startswith("r:")]
    events = {(e.event, e.fencing_token, e.holder) for e in store.history("job", 50)}
    assert ("abandoned", dead.fence, "h:dead") in events
    assert ("expired", moved.fence, "h:second") in events


def test_a_live_older_run_keeps_its_record_across_renewals_and_finishes(store: Store) -> None:
    """overlap "allow": the older run renews and finishes under its own field; nothing is
    recorded as ended while its lease is live."""
    old = _claim(store, 1_000, "old", 60_000, overlap="allow")
    new = _claim(store, 2_000, "new", 60_000, overlap="allow")
    assert new.ended == ()
    assert store.renew("job", 1_000, "old", 60_000) is not None
    field = _state(store)["r:old"]
    assert field.startswith(f"1000:1:{old.fence}:h:old:")
    info = FinishInfo(attempt=1, fence=old.fence, holder="h:old")
    assert store.finish("job", 1_000, "old", "done", retention=KEEP, info=info)
    assert "r:old" not in _state(store)


def test_a_crashed_triggered_run_is_recorded_as_abandoned(store: Store) -> None:
    """A triggered run whose lease lapsed is recorded (kind manual) by the next claim."""
    _claim(store, 1_000, "first", 5)
    store.queue_trigger("job", "t1|0|1|me", 10)
    taken = store.take_trigger(TriggerClaim("job", "manual-owner", 5, "allow", "h:m", KEEP))
    assert taken.status == "won"
    _lapse(store, taken.lease_until_ms)
    reply = _claim(store, 2_000, "me", 5_000)
    assert (taken.slot_ms, 1) in reply.ended
    manual = [e for e in store.history("job", 50) if e.event == "abandoned"]
    assert [e.kind for e in manual] == ["manual"]
