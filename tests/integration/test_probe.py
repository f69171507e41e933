"""Read first (`Store.read_claims`): a claim read first is answered exactly as the claim
would be, on every store; on Redis a loser's reads run no script, and a runner reads first
only while another replica lately won the job's slots."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
import redis

from cronlock import CronRunner, FakeClock, IntervalSchedule
from cronlock.runner.requests import PROBE_FOR_MS
from cronlock.stores import ClaimReply, ClaimStatus, Store
from cronlock.stores.redis import RedisStore
from cronlock.stores.types import FinishInfo, Retention, SlotClaim
from cronlock.testing import RedisServer, wait_until
from tests.writes import count_writes

KEEP = Retention(10, 0)


def ask(
    store: Store, key: str, owner: str, slot_ms: int = 1_000, *, probe: bool = False, **kw: object
) -> ClaimReply:
    """Claim ``slot_ms`` of ``key``; with ``probe``, read first and claim only if needed."""
    lease_ms = int(kw.pop("lease_ms", 30_000))  # type: ignore[call-overload]
    claim = SlotClaim(key, slot_ms, owner, lease_ms, 2, "skip", f"h:1:{owner}", KEEP)
    claim = replace(claim, **kw)  # type: ignore[arg-type]
    [reply] = store.read_claims([claim]) if probe else [None]
    if reply is None:
        [reply] = store.claim_slots([claim])
    assert isinstance(reply, ClaimReply), reply
    return reply


def end(store: Store, key: str, owner: str, outcome: str) -> None:
    info = FinishInfo(attempt=1, fence=1, holder=f"h:1:{owner}", duration_ms=1)
    assert store.finish(key, 1_000, owner, outcome, retention=KEEP, info=info)


def lapsed(store: Store, key: str) -> None:
    won = ask(store, key, "first", lease_ms=5)
    wait_until(lambda: store.time_ms() > won.lease_until_ms, timeout=5, interval=0.002)


#: Each scenario leaves a job's state as another replica would, before "me" claims slot 1000.
SCENARIOS: dict[str, Callable[[Store, str], object]] = {
    "free": lambda store, key: None,
    "taken": lambda store, key: ask(store, key, "first"),
    "done": lambda store, key: (ask(store, key, "first"), end(store, key, "first", "done")),
    "failed": lambda store, key: (ask(store, key, "first"), end(store, key, "first", "failed")),
    "newer slot": lambda store, key: ask(store, key, "first", slot_ms=2_000),
    "older slot": lambda store, key: ask(store, key, "first", slot_ms=500),
    "paused": lambda store, key: store.pause(key),
    "own claim": lambda store, key: ask(store, key, "me"),
    "lapsed lease": lapsed,
}


def comparable(reply: ClaimReply) -> tuple[object, ...]:
    """A reply without the times, which depend on when its scenario ran."""
    return (reply.status, reply.attempt, reply.fence, reply.detail, reply.ended)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("recheck", [False, True])
def test_a_probed_claim_is_answered_as_the_claim_would_be(
    store: Store, scenario: str, recheck: bool
) -> None:
    for key in ("plain", "probed"):
        SCENARIOS[scenario](store, key)
    plain = ask(store, "plain", "me", recheck=recheck)
    probed = ask(store, "probed", "me", recheck=recheck, probe=True)
    assert comparable(probed) == comparable(plain)
    if probed.status is ClaimStatus.TAKEN:  # the holder's lease, on the store's clock
        holder = ask(store, "probed", "other")
        assert probed.lease_until_ms == holder.lease_until_ms
        assert 0 < probed.server_now_ms <= holder.server_now_ms


def test_a_probed_claim_that_asks_to_be_woken_is_still_noted(client: redis.Redis) -> None:
    """``taken`` with ``wake`` needs the script: the holder's finish must announce it."""
    store = RedisStore(client, prefix="probe-wake")
    ask(store, "a", "first")
    assert ask(store, "a", "me", wake=True, probe=True).status is ClaimStatus.TAKEN
    assert client.hget("probe-wake:job:{a}", "watched") in (b"1000", "1000")


@pytest.fixture
def private() -> Iterator[redis.Redis]:
    with RedisServer() as server:
        client = server.client()
        yield client
        client.close()


def scripts_run(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_losers_reads_run_no_script(private: redis.Redis) -> None:
    """50 claims that all lost: one round trip of reads answers them, with no EVALSHA."""
    store = RedisStore(private, prefix="probe")
    winner = [
        SlotClaim(f"j{i}", 1_000, "winner", 30_000, 2, "skip", "h:1:w", KEEP) for i in range(50)
    ]
    assert {r.status for r in store.claim_slots(winner)} == {ClaimStatus.WON}  # type: ignore[union-attr]
    losers = [replace(c, owner="loser") for c in winner]
    before = scripts_run(private)
    writes = count_writes(private)
    read = store.read_claims(losers)
    assert writes == [1]
    assert {r.status for r in read if r is not None} == {ClaimStatus.TAKEN}
    assert len(read) == 50
    assert scripts_run(private) == before
    claimed = store.claim_slots(losers)
    assert scripts_run(private) == before + 50
    assert [comparable(r) for r in claimed] == [comparable(r) for r in read]  # type: ignore[arg-type]


def test_a_claim_read_first_that_finds_the_slot_free_is_left_to_the_claim(
    private: redis.Redis,
) -> None:
    store = RedisStore(private, prefix="probe-free")
    claim = SlotClaim("f", 1_000, "me", 30_000, 2, "skip", "h:1:me", KEEP)
    assert store.read_claims([claim]) == [None]
    assert ask(store, "f", "me", probe=True).status is ClaimStatus.WON


def calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_runner_reads_first_after_losing_a_slot_and_stops_when_left_alone(
    private: redis.Redis,
) -> None:
    """Runner B loses a slot to A: its claims of the next slots cost a read, and no script
    while A wins them. Alone, B reads and claims (and runs), and once ``PROBE_FOR_MS``
    has passed since it last lost, it claims straight away again."""
    clocks = [FakeClock(1_800_000_000.0), FakeClock(1_800_000_000.0)]
    runs: list[str] = []
    a, b = (CronRunner(private, prefix="probe-runner", clock=c, default_ttl=5) for c in clocks)
    for name, runner in (("a", a), ("b", b)):
        runner.add_job(lambda ctx, n=name: runs.append(n), IntervalSchedule(10), key="job")

    def step(*runners: CronRunner, seconds: float = 10) -> tuple[int, int]:
        """Advance both clocks, step ``runners`` in order: (scripts run, reads) meanwhile."""
        for clock in clocks:
            clock.advance(seconds)
        scripts, reads = calls(private, "evalsha"), calls(private, "hmget")
        for runner in runners:
            runner.run_pending()
        return calls(private, "evalsha") - scripts, calls(private, "hmget") - reads

    step(a, b)  # A claims and runs inline; B is told the slot is done
    # What a slot costs when only A claims it: its claim and its finish (the scripts'
    # own HMGETs count as reads too).
    scripts, reads = step(a)
    assert step(a, b) == (scripts, reads + 1)  # B read the state: no script of its own
    assert step(b) == (scripts, reads + 1)  # B alone: a read, then its claim and finish
    assert step(b, seconds=PROBE_FOR_MS / 1000) == (scripts, reads)  # long since B lost: no read
    assert runs == ["a", "a", "a", "b", "b"]
