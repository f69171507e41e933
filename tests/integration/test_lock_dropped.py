"""Renewing handles dropped without release: the renewal lets them go; held ones renew on."""

from __future__ import annotations

import gc
import logging
import weakref
from typing import Callable

import pytest
import redis

from cronlock import RedisLock, exclusive, redis_lock
from cronlock._keys import LockKeys
from cronlock.lock._holds import HOLDS
from cronlock.testing import wait_until

TTL = 1.0  # renewed every ttl/3; shorter leases lapse when a loaded machine delays a renewal


def lock_key(key: str) -> str:
    return LockKeys.of("cronlock", key).lock


def renewed(client: redis.Redis, key: str, times: int) -> Callable[[], bool]:
    """A predicate: the key's PTTL went up ``times`` times (a GC pass at every sample)."""
    samples = [client.pttl(lock_key(key))]

    def check() -> bool:
        gc.collect()  # a handle only the renewal referenced would be collected here
        samples.append(client.pttl(lock_key(key)))
        return sum(b > a for a, b in zip(samples, samples[1:])) >= times

    return check


def garbage_warnings(caplog: pytest.LogCaptureFixture, key: str) -> list[str]:
    """The WARNINGs about a dropped handle of ``key`` (a handle another test of this
    process dropped may be noticed during this one: it names its own key)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and "garbage-collected" in r.getMessage()
        and repr(key) in r.getMessage()
    ]


def test_a_dropped_renewing_handle_lets_its_lease_lapse(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A renew=True handle dropped unreleased is collected; its key expires; a WARNING names it."""
    caplog.set_level(logging.WARNING, logger="cronlock")
    holds_before = len(HOLDS)  # other tests' holds may still be ending: count ours only
    lock = RedisLock(client, "dropped-job", ttl=TTL, renew=True).acquire()
    wait_until(renewed(client, "dropped-job", 1), timeout=10, interval=0.02)  # renewing
    handle = weakref.ref(lock)
    del lock
    gc.collect()
    assert handle() is None  # the renewal thread does not keep it alive
    wait_until(lambda: client.exists(lock_key("dropped-job")) == 0, timeout=5, interval=0.02)
    wait_until(lambda: garbage_warnings(caplog, "dropped-job"), timeout=5)
    assert len(garbage_warnings(caplog, "dropped-job")) == 1
    wait_until(lambda: len(HOLDS) <= holds_before, timeout=5)
    # The key is free again: a new holder gets it at once.
    with redis_lock(client, "dropped-job", ttl=5):
        pass


def test_a_held_handle_keeps_renewing_past_several_ttls(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A handle its owner still references is renewed past several ttls, GC or not."""
    caplog.set_level(logging.WARNING, logger="cronlock")
    lock = RedisLock(client, "held-job", ttl=TTL, renew=True).acquire()
    wait_until(renewed(client, "held-job", 6), timeout=10, interval=0.02)
    value = client.get(lock_key("held-job"))
    assert (value.decode() if isinstance(value, bytes) else value) == lock.token
    assert not lock.lost.is_set()
    assert lock.release() is True
    assert garbage_warnings(caplog, "held-job") == []


def test_a_with_block_without_as_keeps_renewing(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """``with redis_lock(...):`` with no name bound: the with statement keeps the handle alive."""
    caplog.set_level(logging.WARNING, logger="cronlock")
    with redis_lock(client, "with-job", ttl=TTL, renew=True):
        token = client.get(lock_key("with-job"))
        wait_until(renewed(client, "with-job", 6), timeout=10, interval=0.02)
        assert client.get(lock_key("with-job")) == token
    assert client.exists(lock_key("with-job")) == 0  # released by the with block
    assert garbage_warnings(caplog, "with-job") == []


def test_exclusive_keeps_renewing_while_the_function_runs(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """``@exclusive`` (renew on by default) holds its handle for the whole call."""
    caplog.set_level(logging.WARNING, logger="cronlock")

    @exclusive("exclusive-job", ttl=TTL, client=client)
    def job() -> bytes:
        token = client.get(lock_key("exclusive-job"))
        wait_until(renewed(client, "exclusive-job", 6), timeout=10, interval=0.02)
        assert client.get(lock_key("exclusive-job")) == token
        return b"done"

    assert job() == b"done"
    assert client.exists(lock_key("exclusive-job")) == 0
    assert garbage_warnings(caplog, "exclusive-job") == []
