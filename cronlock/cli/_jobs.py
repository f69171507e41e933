"""``cronlock jobs``: every registered job with its state, last runs and next run."""

from __future__ import annotations

import argparse

from cronlock.admin import JobStatus
from cronlock.cli._common import EXIT_OK, add_global_options, emit_json, render_table
from cronlock.cli._ops import admin_for, ago, hint_elsewhere, short, when

NAME = "jobs"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``jobs`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="list registered jobs: state, last success/failure, next run",
        description=(
            "List every job runners registered under --prefix: schedule, state (paused, "
            "running, done, failed), last success and failure, consecutive failures, next "
            "run, when a live runner last had it (SEEN: now, or how long ago: a job whose "
            "runners are all gone; drop one deleted from the code with `cronlock forget`), "
            "and who runs it now. Jobs of removed dynamic schedules are not listed."
        ),
    )
    add_global_options(parser, suppress=True)
    parser.set_defaults(handler=run)


def state(job: JobStatus) -> str:
    """What the STATE column says."""
    if job.paused:
        return "paused"
    if job.status == "running" and job.lease_until is None:
        return "running?"
    return job.status or "never ran"


def seen(job: JobStatus) -> str:
    """What the SEEN column says: ``now`` while a live runner has the job, else when one
    last did (``?`` when heartbeats cannot tell)."""
    if job.runners is None:
        return "?"
    if job.runners:
        return "now"
    return ago(job.last_seen) if job.last_seen is not None else "never"


def run(args: argparse.Namespace) -> int:
    """Print the table (or JSON)."""
    admin = admin_for(args)
    jobs = admin.jobs()
    if not jobs:
        hint_elsewhere(args, admin)
    if args.json:
        emit_json([j.as_dict() for j in jobs])
        return EXIT_OK
    if not jobs:
        print(f"no jobs registered under {args.prefix}: (has a runner started?)")
        return EXIT_OK
    rows = [
        (
            j.key,
            short(j.schedule or "?", 36),
            state(j),
            ago(j.last_success),
            ago(j.last_failure),
            j.consecutive_failures,
            when(j.next_run),
            seen(j),
            j.holder or "",
        )
        for j in jobs
    ]
    headers = [
        "KEY",
        "SCHEDULE",
        "STATE",
        "LAST OK",
        "LAST FAIL",
        "FAILS",
        "NEXT (UTC)",
        "SEEN",
        "HOLDER",
    ]
    print(render_table(headers, rows))
    return EXIT_OK
