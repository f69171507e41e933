"""What one call costs the Redis server: a claim script against plain reads.

    python bench/server_cost.py            # 300 pipelines of 100 calls per row, 2 rounds

One private Redis server (started here) holds 100 job states as another replica's
running claims. Each row sends the same call for all 100 jobs in each of 300 pipelines
and prints the server's CPU per call (``INFO cpu``, sys + user, over the row). The
claim script answers ``taken`` for every one of them, as it does for a loser. The rows
show why a loser's claim is cheap only as a plain read: a ``redis.call`` inside a
script costs several times the plain command, and a round trip costs more than either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cronlock._scripts import Script
from cronlock.testing import RedisServer

JOBS = 100
PIPELINES = 300
FIELDS = ("slot", "status", "attempt", "owner", "lease", "paused")


def main() -> None:
    claim = Script("job_claim")
    with RedisServer() as server:
        client = server.client()
        now = int(time.time() * 1000)
        keys = [f"cost:job:{{j{i}}}" for i in range(JOBS)]
        for key in keys:
            client.hset(
                key,
                mapping={
                    "slot": now,
                    "status": "running",
                    "attempt": 1,
                    "owner": "winner",
                    "lease": now + 600_000,
                    "fence": 1,
                    "holder": "h:1:w",
                },
            )
        claim_sha = client.script_load(claim.source)
        bare_sha = client.script_load("return 1")
        read_sha = client.script_load(
            "local t = redis.call('TIME') "
            "return redis.call('HMGET', KEYS[1], 'slot', 'status', 'lease')"
        )
        args = (now, "loser", 5_000, 3, "skip", "h:1:l", 1_000, 0)

        def script(sha: str) -> Callable[[Any], None]:
            def fill(pipe: Any) -> None:
                for key in keys:
                    pipe.evalsha(sha, 2, key, key.replace(":job:", ":history:"), *args)

            return fill

        def hmget(pipe: Any) -> None:
            for key in keys:
                pipe.hmget(key, *FIELDS)

        def ping(pipe: Any) -> None:
            pipe.ping()

        rows: list[tuple[str, Callable[[Any], None], int]] = [
            ("job_claim.lua answering taken", script(claim_sha), JOBS),
            ("EVALSHA of `return 1`, same arguments", script(bare_sha), JOBS),
            ("EVALSHA doing TIME and one HMGET", script(read_sha), JOBS),
            ("plain HMGET of the 6 fields a read takes", hmget, JOBS),
            ("a round trip (a pipeline of one PING)", ping, 1),
        ]

        def cpu() -> float:
            info = client.info("cpu")
            return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

        print("| call | round 1, µs per call | round 2, µs per call |")
        print("|---|---:|---:|")
        figures: dict[str, list[float]] = {name: [] for name, _, _ in rows}
        for _ in range(2):
            for name, fill, calls in rows:
                before = cpu()
                for _ in range(PIPELINES):
                    pipe = client.pipeline(transaction=False)
                    fill(pipe)
                    pipe.execute()
                figures[name].append((cpu() - before) * 1e6 / (PIPELINES * calls))
        for name, (first, second) in figures.items():
            print(f"| {name} | {first:.1f} | {second:.1f} |")
        client.close()


if __name__ == "__main__":
    main()
