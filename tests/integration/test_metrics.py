"""PrometheusMetrics fed by real runner runs (FakeClock + run_pending) against a real Redis."""

from __future__ import annotations

import time
from typing import Any, Optional

import pytest
import redis

from cronlock import CronRunner, FakeClock, JobContext
from cronlock._keys import job_key
from cronlock.stores.redis.claims import ClaimRequest, claim
from cronlock.testing import wait_until

prometheus_client = pytest.importorskip("prometheus_client")
from cronlock.metrics import PrometheusMetrics  # noqa: E402

PREFIX = "m"
T0 = 1_800_000_000.0  # a multiple of 10 s


def _sample(registry: Any, name: str, **labels: str) -> Optional[float]:
    value = registry.get_sample_value(name, labels)
    return None if value is None else float(value)


def _runner(client: redis.Redis, clock: FakeClock, metrics: PrometheusMetrics) -> CronRunner:
    return CronRunner(client, prefix=PREFIX, clock=clock, default_ttl=5, observers=[metrics])


def test_outcomes_durations_and_claims(client: redis.Redis) -> None:
    """Two replicas, three slots: wins, losses, outcomes and durations per job are counted."""
    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    clocks = [FakeClock(T0 - 1), FakeClock(T0 - 1)]
    runners = [_runner(client, c, metrics) for c in clocks]
    calls = {"n": 0}
    for runner in runners:

        @runner.interval(seconds=10, key="flaky", catch_up=3)
        def flaky() -> None:
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("second run fails")

    for step in range(3):
        for clock, runner in zip(clocks, runners):
            clock.set(T0 + step * 10 + 0.001)
            runner.run_pending()

    s = lambda name, **kw: _sample(registry, name, **kw)  # noqa: E731
    assert s("cronlock_runs_total", job="flaky", outcome="succeeded") == 2
    assert s("cronlock_runs_total", job="flaky", outcome="failed") == 1
    assert s("cronlock_claims_total", job="flaky", status="won") == 3
    assert s("cronlock_claims_total", job="flaky", status="done") == 3  # the second replica
    assert s("cronlock_run_duration_seconds_count", job="flaky") == 3
    assert s("cronlock_start_delay_seconds_count", job="flaky") == 3
    assert s("cronlock_running", job="flaky") == 0
    assert s("cronlock_takeovers_total", job="flaky") is None  # no takeover happened
    last = s("cronlock_last_success_timestamp_seconds", job="flaky")
    assert last is not None
    assert abs(last - time.time()) < 300


def test_a_takeover_is_counted(client: redis.Redis) -> None:
    """A slot taken over after its owner's lease lapsed counts in takeovers_total."""
    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    state = job_key(PREFIX, "job")
    slot_ms = int(T0 * 1000)
    dead = claim(client, ClaimRequest(state, slot_ms, "dead-owner", 200, 3, "skip", "x"))
    assert dead.status == "won"
    clock = FakeClock(T0 + 0.001)
    runner = _runner(client, clock, metrics)
    attempts: list[int] = []

    @runner.interval(seconds=10, key="job", catch_up=3)
    def job(ctx: JobContext) -> None:
        attempts.append(ctx.attempt)

    assert runner.run_pending() == 0  # the dead owner's lease is still live
    assert _sample(registry, "cronlock_claims_total", job="job", status="taken") == 1

    def lapsed() -> bool:
        lease = int(client.hget(state, "lease") or 0)
        now_s, now_us = client.time()
        return lease <= now_s * 1000 + now_us // 1000

    wait_until(lapsed, timeout=5)
    clock.advance(0.3)
    assert runner.run_pending() == 1
    assert attempts == [2]
    assert _sample(registry, "cronlock_takeovers_total", job="job") == 1
    assert _sample(registry, "cronlock_runs_total", job="job", outcome="succeeded") == 1


def test_start_delay_measures_slot_to_handler_start(client: redis.Redis) -> None:
    """The start delay is the time from the slot boundary to the handler start."""
    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    # The run's start time is wall time, so the fake clock is set to wall time here.
    now = time.time()
    clock = FakeClock(now)
    runner = _runner(client, clock, metrics)

    @runner.interval(seconds=10, key="tick", catch_up=10)
    def tick() -> None:
        pass

    assert runner.run_pending() == 1  # the latest 10 s boundary, at most 10 s ago
    count = _sample(registry, "cronlock_start_delay_seconds_count", job="tick")
    total = _sample(registry, "cronlock_start_delay_seconds_sum", job="tick")
    assert count == 1
    assert total is not None
    assert 0 <= total < 60  # generous: the machine is shared
    assert _sample(registry, "cronlock_start_delay_seconds_bucket", job="tick", le="+Inf") == 1


def test_default_registry_and_namespace() -> None:
    """Without a registry the metrics go to prometheus_client's REGISTRY, under the namespace."""
    metrics = PrometheusMetrics(namespace="cronlock_test_default")
    try:
        metrics.claimed("k", 0, "won", "r")
        value = prometheus_client.REGISTRY.get_sample_value(
            "cronlock_test_default_claims_total", {"job": "k", "status": "won"}
        )
        assert value == 1
    finally:
        for collector in (
            metrics.runs,
            metrics.run_duration,
            metrics.start_delay,
            metrics.claims,
            metrics.takeovers,
            metrics.running,
            metrics.last_success,
        ):
            prometheus_client.REGISTRY.unregister(collector)


def test_exposition_text_lists_every_metric(client: redis.Redis) -> None:
    """generate_latest renders every metric family, so a /metrics route serves them as is."""
    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry, namespace="app")
    clock = FakeClock(T0 + 0.001)
    runner = _runner(client, clock, metrics)

    @runner.interval(seconds=10, key="x", catch_up=3)
    def x() -> None:
        pass

    runner.run_pending()
    text = prometheus_client.generate_latest(registry).decode()
    for family in (
        "app_runs_total",
        "app_run_duration_seconds_bucket",
        "app_start_delay_seconds_bucket",
        "app_claims_total",
        "app_abandoned_total",
        "app_running",
        "app_last_success_timestamp_seconds",
    ):
        assert family in text
    assert _sample(registry, "app_runs_total", job="x", outcome="succeeded") == 1
