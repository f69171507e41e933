"""PostgreSQL audit log of runs: an observer that keeps one row per run attempt.

Install the extra (``pip install "cronlock[postgres]"``, psycopg 3) and pass an instance
to the runner:

```python
history = PostgresHistory("postgresql://app@db/app")
runner = CronRunner(client, prefix="myapp", observers=[history])
```

What it guarantees, and what it does not:

* **A row when a run starts, updated when it ends.** A running run's row says
  ``running``; its end sets the outcome, the end time, the duration and, for a failure,
  the error type and traceback. ``kind`` says why it ran: ``scheduled``, ``manual``
  (with the trigger's id in ``trigger_id``) or ``takeover`` (attempt 2 or later).
* **An attempt whose process died is ended too.** When a replica takes a slot over,
  the rows of the earlier attempts still ``running`` become ``taken_over`` (one is
  written for the previous attempt when its process died before writing its own);
  when a slot is abandoned after ``max_attempts``, its last attempt's row becomes
  ``abandoned`` (a row with an empty attempt is written when there was none).
* **A run is never slowed or broken by PostgreSQL.** The observer calls only append to
  an in-memory buffer; a daemon writer thread of its own (started on the first write,
  never at import or construction) connects, creates or upgrades the table, and writes
  batches in one transaction each.
* **Bounded memory.** When PostgreSQL is down, writes wait in the buffer (``buffer``
  at most) and the writer reconnects with a capped backoff. Once the buffer is full,
  new writes are dropped and counted in
  [`PostgresHistory.dropped`][cronlock.postgres.PostgresHistory.dropped], with a WARNING
  at most once a minute. The log is an audit trail, not a guarantee: writes waiting in
  memory are lost if the process dies (its run's row may then stay ``running`` until a
  takeover or abandonment ends it; a run that is neither keeps it).
* **Fork-aware.** A forked child (gunicorn workers) starts with an empty buffer, no
  writer and no connection: it never touches its parent's socket, and the parent
  alone writes what it had buffered.

The table (created with ``CREATE TABLE IF NOT EXISTS`` under an advisory lock, so many
replicas starting at once do not race; a table an older version created gets the new
columns, and its columns that a running row leaves empty lose their ``NOT NULL``):

```text
id             bigserial primary key
job            text         the job's key
slot           timestamptz  the scheduled occurrence (a manual run: when it started)
attempt        integer      1, or 2+ after a takeover
fencing_token  bigint
owner          text         "host:pid:runner-id" (RunRecord.holder)
runner_id      text
status         text         running | succeeded | failed | cancelled | lost
                            | taken_over | abandoned
started_at     timestamptz
finished_at    timestamptz  null while running
duration       double precision  seconds
error_type     text         exception class name of a failed run, else null
traceback      text         its traceback (last 4000 characters), else null
kind           text         scheduled | manual | takeover
trigger_id     text         the trigger request's id, for a manual run
run_id         text         one run's identity (unique): runner, fence, attempt, slot, job

indexes: (job, started_at), (started_at), (job, slot), unique (run_id)
```

| module      | owns                                                       |
|-------------|------------------------------------------------------------|
| `history`   | `PostgresHistory`: the observer, reading rows, the probe   |
| `rows`      | what each observer call writes; rows read back             |
| `table`     | the columns, creating and upgrading the table, statements  |
| `writer`    | the buffer and the writer thread                           |
| `lifecycle` | fork and exit hooks                                        |
"""

from __future__ import annotations

from cronlock.postgres.history import PostgresHistory, Probe
from cronlock.postgres.rows import AuditRow
from cronlock.postgres.table import COLUMNS

__all__ = ["COLUMNS", "AuditRow", "PostgresHistory", "Probe"]
