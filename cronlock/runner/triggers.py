"""Manual runs: take a job's pending trigger requests from the store and launch them."""

from __future__ import annotations

import logging
import secrets

from cronlock.clock import monotonic
from cronlock.context import ErrorContext
from cronlock.errors import CorruptStateError
from cronlock.job import Job
from cronlock.observers import notify
from cronlock.outcomes import ClaimStatus, RunKind, TriggerStatus
from cronlock.runner.host import RunnerHost
from cronlock.runner.jobs import JobTable
from cronlock.runner.run import Run
from cronlock.runner.scheduler import Scheduler
from cronlock.stores.types import TriggerClaim, TriggerReply

logger = logging.getLogger("cronlock")

#: Why a trigger was dropped, for the log (history records the reason too).
_DROPPED = {
    TriggerStatus.PAUSED: "the job is paused",
    TriggerStatus.BUSY: "a run is still going (overlap skip; use force)",
    TriggerStatus.EXPIRED: "it expired before a replica took it",
}


class Triggers:
    """Starts every pending manual run of this runner's jobs that it wins."""

    def __init__(self, host: RunnerHost, scheduler: Scheduler, jobs: JobTable) -> None:
        self.host = host
        self.scheduler = scheduler
        self.jobs = jobs

    def has_job(self, key: str) -> bool:
        job = self.jobs.get(key)
        return job is not None and job.enabled

    def run(self, keys: list[str], *, inline: bool) -> int:
        """Start every pending manual run of ``keys`` this runner wins; how many started."""
        host = self.host
        store = host.store
        started = 0
        for key in keys:
            while not host.stopping:
                job = self.jobs.get(key)
                if job is None:
                    break
                owner = secrets.token_hex(8)
                sent_at = monotonic()  # lease deadlines: the monotonic clock, as for claims
                claim = TriggerClaim(
                    key, owner, job.options.ttl_ms, job.options.overlap, host.holder, host.retention
                )
                try:
                    reply = store.take_trigger(claim)
                except store.errors as error:
                    host.count("redis_errors")
                    host.report(error, ErrorContext(key, "acquire"))
                    break
                if reply.status == TriggerStatus.CORRUPT:
                    host.report(
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
                        _DROPPED.get(reply.status, reply.status),
                    )
                    continue
                started += self._launch(job, owner, reply, sent_at, inline)
        return started

    def _launch(
        self, job: Job, owner: str, reply: TriggerReply, sent_at: float, inline: bool
    ) -> int:
        host = self.host
        host.count("claims_won")
        logger.info(
            "cronlock: running job %r now (trigger %s, fence %d)",
            job.key,
            reply.trigger_id,
            reply.fence,
        )
        if host.observers:
            won = ClaimStatus.WON
            notify(host.observers, "claimed", job.key, reply.slot_ms, won, host.runner_id)
        run = Run(
            host,
            job,
            owner=owner,
            attempt=1,
            fence=reply.fence,
            sent_at=sent_at,
            slot_ms=reply.slot_ms,
            on_end=self.scheduler.run_ended,
            kind=RunKind.MANUAL,
            trigger_id=reply.trigger_id,
        )
        return self.scheduler.launch(run, inline)
