"""The runner: [`CronRunner`][cronlock.runner.CronRunner] and the parts behind it.

| module            | owns                                                               |
|-------------------|--------------------------------------------------------------------|
| `facade`          | `CronRunner`: registration, lifecycle, the conveniences            |
| `jobs`            | `JobTable`: the registered jobs, what their handles change         |
| `host`            | `RunnerHost`: what the parts share (store, clock, counters, reports)|
| `slots`           | `SlotQueue`: the heap of next slots and the backlog                |
| `decisions`       | `decide`: what a claim reply means for the slot                    |
| `scheduler`       | `Scheduler`: the scheduler thread, the claims, the worker pool     |
| `run`             | `Run`: one claimed slot (handler, renewal, finish)                 |
| `operations`      | `Operations`: events, periodic sync, heartbeat, registry           |
| `triggers`        | `Triggers`: manual runs                                            |
| `dynamic`         | `TaskRegistry`: named handlers and their dynamic schedules         |
| `forks`           | runners across `fork()`                                            |
"""

from __future__ import annotations

from cronlock.runner.facade import AFTER_FORK, CronRunner
from cronlock.runner.host import ErrorHandler

__all__ = ["AFTER_FORK", "CronRunner", "ErrorHandler"]
