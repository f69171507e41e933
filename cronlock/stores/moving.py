"""Moving a fleet from one store to another: what operators decided goes with it.

Claims, history and heartbeats belong to the store a fleet runs on and stay behind; the
job registry and the decisions operators made (dynamic schedules, paused jobs,
pause-all) are copied, so the fleet on the new store does what the old one was told,
and a pause-all of the new store covers every job before a replica starts on it (a
runner registers its jobs only at its first sync). docs/stores.md gives the steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from cronlock.stores.base import Store

__all__ = ["Copied", "copy_decisions"]


@dataclass(frozen=True)
class Copied:
    """What `copy_decisions` wrote to the target."""

    jobs: int
    schedules: int
    paused: tuple[str, ...]
    pause_all: bool


def copy_decisions(source: Store, target: Store) -> Copied:
    """Copy the job registry, dynamic schedules, pause flags and pause-all from
    ``source`` to ``target``.

    Idempotent (a schedule of the same id is replaced, a pause set again); nothing is
    removed from ``target``, and ``source`` is only read.
    """
    registry = source.registry()
    target.register_jobs(registry)
    schedules = source.schedules()
    for schedule_id, spec in sorted(schedules.items()):
        target.put_schedule(schedule_id, spec)
    keys = sorted(registry)
    paused = tuple(
        key
        for key, state in zip(keys, source.job_states(keys))
        if state.fields.get("paused") == "1"
    )
    for key in paused:
        target.pause(key)
    pause_all = source.pause_all_active()
    if pause_all:
        target.pause_all([])
    return Copied(len(registry), len(schedules), paused, pause_all)
