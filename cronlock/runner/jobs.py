"""The jobs registered in one runner, by key; what job handles' start/stop/destroy change."""

from __future__ import annotations

import threading
from typing import Callable, Optional

from cronlock.job import Job
from cronlock.registrar import duplicate_key_error


class JobTable:
    """A runner's jobs by key (the [`JobControl`][cronlock.job.JobControl] of their handles).

    Every change happens under the runner's lock ``cond``; ``version`` is bumped when a
    job is added or removed (the operations thread re-registers the jobs then).

    Args:
        cond: the runner's lock.
        on_enabled: called (under ``cond``) with a job added or started again, to queue
            its first slot.
    """

    def __init__(self, cond: threading.Condition, on_enabled: Callable[[Job], None]) -> None:
        self.cond = cond
        self.on_enabled = on_enabled
        self.by_key: dict[str, Job] = {}
        self.version = 0

    def add(self, job: Job) -> None:
        """Register ``job``; ConfigurationError when its key is taken."""
        with self.cond:
            if job.key in self.by_key:
                raise duplicate_key_error(job.key, "in this runner")
            self.by_key[job.key] = job
            self.version += 1
            self.on_enabled(job)

    def get(self, key: str) -> Optional[Job]:
        with self.cond:
            return self.by_key.get(key)

    def all(self) -> list[Job]:
        with self.cond:
            return list(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)

    def enable(self, job: Job) -> None:
        with self.cond:
            if job.enabled:
                return
            job.enabled = True
            job.generation += 1
            self.on_enabled(job)

    def disable(self, job: Job) -> None:
        with self.cond:
            job.enabled = False
            job.generation += 1  # heap entries of older generations are dropped
            job.next_slot_ms = None

    def remove(self, job: Job) -> None:
        with self.cond:
            self.disable(job)
            if self.by_key.get(job.key) is job:
                del self.by_key[job.key]
                self.version += 1

    def after_fork(self) -> None:
        """In a forked child: every queued slot of the parent is stale."""
        for job in self.by_key.values():
            job.generation += 1
