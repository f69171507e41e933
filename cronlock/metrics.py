"""Prometheus metrics: an observer that counts claims and runs per job.

Install the extra (``pip install "cronlock[prometheus]"``, ``prometheus_client``) and
pass an instance to the runner; expose the registry the way your app already does
(``prometheus_client.start_http_server``, a WSGI app, a Flask route, a multiprocess
collector). The library never starts an HTTP server.

Metrics (with the default ``namespace="cronlock"``):

* ``cronlock_runs_total{job, outcome}``: runs that ended; outcome is a
  [`RunOutcome`][cronlock.outcomes.RunOutcome]: ``succeeded``, ``failed``, ``cancelled``
  or ``lost``.
* ``cronlock_run_duration_seconds{job}``: histogram, handler start to end.
* ``cronlock_start_delay_seconds{job}``: histogram, slot boundary to handler start
  (scheduling lag, takeovers).
* ``cronlock_claims_total{job, status}``: claim replies (a
  [`ClaimStatus`][cronlock.outcomes.ClaimStatus]): ``won``, ``taken``, ``done``,
  ``stale``, ``busy``, ``exhausted``, ``paused``, ``unreplicated`` (``wait_replicas``).
* ``cronlock_takeovers_total{job}``: runs started as attempt 2 or later.
* ``cronlock_abandoned_total{job, reason}``: runs that ended without a finish, counted
  by the replica whose claim found them: ``reason`` ``max_attempts`` (the slot is
  abandoned after its last takeover) or ``lease_lapsed`` (an older run never finished
  before a newer slot started).
* ``cronlock_running{job}``: handlers running now in this process.
* ``cronlock_last_success_timestamp_seconds{job}``: end of the last successful run seen
  by this process (Unix time).

Counts are per process: sum them across replicas in PromQL
(``sum by (job, outcome) (rate(cronlock_runs_total[5m]))``). Each slot is won by one
replica, so ``cronlock_claims_total{status="won"}`` summed over the fleet counts runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Optional

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from cronlock.context import JobContext
from cronlock.errors import ConfigurationError
from cronlock.observers import RunRecord
from cronlock.outcomes import ClaimStatus, RunOutcome

__all__ = ["DELAY_BUCKETS", "DURATION_BUCKETS", "PrometheusMetrics"]

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, float("inf"))
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf"))


class PrometheusMetrics:
    """An observer that records claims and runs in Prometheus metrics, per job.

    Create one per registry and pass the same instance to every runner of the process
    (registering the same metric names twice in one registry is an error in
    ``prometheus_client``). Label values are job keys: keep them bounded (one per job,
    not per slot).

    Args:
        registry: where the metrics are registered; default: ``prometheus_client``'s
            global ``REGISTRY``.
        namespace: prefix of every metric name.
        duration_buckets: histogram buckets of run durations (seconds).
        delay_buckets: histogram buckets of start delays (seconds).

    Example:
        ```python
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry()
        runner = CronRunner(client, observers=[PrometheusMetrics(registry)])
        ...
        generate_latest(registry)   # what a /metrics endpoint returns
        ```
    """

    def __init__(
        self,
        registry: Optional[CollectorRegistry] = None,
        namespace: str = "cronlock",
        *,
        duration_buckets: Sequence[float] = DURATION_BUCKETS,
        delay_buckets: Sequence[float] = DELAY_BUCKETS,
    ) -> None:
        if not isinstance(namespace, str):
            raise ConfigurationError(f"namespace must be a str; got {namespace!r}")
        reg = REGISTRY if registry is None else registry
        common: dict[str, Any] = {"namespace": namespace, "registry": reg}
        self.registry = reg
        self.runs = Counter(
            "runs", "Runs that ended, by job and outcome.", ["job", "outcome"], **common
        )
        self.run_duration = Histogram(
            "run_duration_seconds",
            "Seconds from handler start to end.",
            ["job"],
            buckets=tuple(duration_buckets),
            **common,
        )
        self.start_delay = Histogram(
            "start_delay_seconds",
            "Seconds from the scheduled slot to the handler start.",
            ["job"],
            buckets=tuple(delay_buckets),
            **common,
        )
        self.claims = Counter(
            "claims", "Claim replies, by job and status.", ["job", "status"], **common
        )
        self.takeovers = Counter(
            "takeovers", "Runs started as attempt 2 or later (a lapsed lease).", ["job"], **common
        )
        self.abandoned_runs = Counter(
            "abandoned",
            "Runs that ended without a finish (max_attempts, or a lease that lapsed).",
            ["job", "reason"],
            **common,
        )
        self.running = Gauge("running", "Handlers running now in this process.", ["job"], **common)
        self.last_success = Gauge(
            "last_success_timestamp_seconds",
            "Unix time at which the last successful run seen by this process ended.",
            ["job"],
            **common,
        )

    def claimed(self, key: str, slot_ms: int, status: ClaimStatus, runner_id: str) -> None:
        """Count one claim reply."""
        self.claims.labels(job=key, status=str(status)).inc()

    def abandoned(self, key: str, slot_ms: int, reason: str, runner_id: str) -> None:
        """Count one run that ended without a finish."""
        self.abandoned_runs.labels(job=key, reason=reason).inc()

    def run_started(self, ctx: JobContext, started_at: datetime) -> None:
        """Observe the start delay; count a takeover; one more handler running."""
        # Clamped at 0: a negative delay only means the wall clock stepped back.
        delay = (started_at - ctx.slot).total_seconds()
        self.start_delay.labels(job=ctx.key).observe(max(0.0, delay))
        if ctx.attempt > 1:
            self.takeovers.labels(job=ctx.key).inc()
        self.running.labels(job=ctx.key).inc()

    def run_finished(self, record: RunRecord) -> None:
        """Count the outcome, observe the duration; one handler fewer running."""
        self.runs.labels(job=record.key, outcome=str(record.status)).inc()
        self.run_duration.labels(job=record.key).observe(max(0.0, record.duration))
        self.running.labels(job=record.key).dec()
        if record.status == RunOutcome.SUCCEEDED:
            self.last_success.labels(job=record.key).set(record.finished_at.timestamp())
