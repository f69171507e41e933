"""The lean path against a real server: which clients take it, and that a broken call
never leaves a connection whose late reply the next call would read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cronlock import RedisLock
from cronlock.stores.redis.claims import ClaimRequest, claim_many
from cronlock.stores.types import ClaimStatus
from cronlock.testing import RedisServer
from tests.writes import count_writes, counting_commands


def test_a_lock_cycle_on_a_plain_client_skips_the_ordinary_path(client: redis.Redis) -> None:
    with RedisLock(client, "wire-plain", ttl=5):
        pass  # loads the scripts
    seen = counting_commands(client)
    with RedisLock(client, "wire-plain", ttl=5) as lock:
        assert lock.token
    assert seen == []


def test_a_single_connection_client_goes_the_ordinary_way(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url, single_connection_client=True) as client:
        seen = counting_commands(client)
        with RedisLock(client, "wire-single", ttl=5):
            pass
        assert seen == ["EVALSHA", "EVALSHA"]


def test_claims_of_a_batch_go_in_one_write_and_each_gets_its_reply(client: redis.Redis) -> None:
    claim_many(client, [ClaimRequest("wire:job:{warm}", 1, "w", 5_000, 1, "skip", "h")] * 2)
    writes = count_writes(client)  # counted once the script is loaded
    requests = [
        ClaimRequest(f"wire:job:{{b{i}}}", 1_000, f"owner-{i}", 5_000, 1, "skip", "h:1:r")
        for i in range(50)
    ]
    replies = claim_many(client, requests)
    again = claim_many(client, [replace(requests[0], owner="other")])
    assert [r.status for r in replies] == [ClaimStatus.WON] * 50
    assert again[0].status == ClaimStatus.TAKEN
    assert writes == [1, 1]


@pytest.fixture
def paused_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def test_a_timed_out_call_is_not_answered_by_its_late_reply(paused_server: RedisServer) -> None:
    client = paused_server.client(socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
    with client:
        client.set("wire:fence", "a")
        paused_server.pause()
        try:
            with pytest.raises(redis.TimeoutError):
                RedisLock(client, "wire-late", ttl=5).acquire()
        finally:
            paused_server.resume()
        # The late reply of the timed-out acquire is on the old connection, if anywhere:
        # the next call must read its own.
        with RedisLock(client, "wire-late-2", ttl=5) as holder:
            assert holder.token
            assert client.get("wire:fence") == b"a"


def test_a_connection_the_server_closed_is_replaced(client: redis.Redis, redis_url: str) -> None:
    with RedisLock(client, "wire-kill", ttl=5):
        ours = client.client_id()  # the pool's one idle connection, once released
    with redis.Redis.from_url(redis_url) as admin:
        assert admin.client_kill_filter(_id=ours) == 1
    with RedisLock(client, "wire-kill", ttl=5) as lock:
        assert lock.token
