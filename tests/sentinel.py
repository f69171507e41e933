"""Sentinel processes on loopback ports watching a private master, for tests."""

from __future__ import annotations

from pathlib import Path

import redis

from cronlock.testing import RedisServer

__all__ = ["Sentinels"]


class Sentinels:
    """``n`` sentinel processes watching ``master`` as ``mymaster``.

    Each is a :class:`RedisServer` in sentinel mode, so it gets a new port if another
    process takes the one it picked before it binds it."""

    def __init__(self, master: RedisServer, n: int, directory: Path, quorum: int = 2) -> None:
        self.servers: list[RedisServer] = []
        try:
            for i in range(n):
                conf = directory / f"sentinel-{i}.conf"
                conf.write_text(
                    f"sentinel monitor mymaster {master.host} {master.port} {quorum}\n"
                    "sentinel down-after-milliseconds mymaster 1000\n"
                    "sentinel failover-timeout mymaster 10000\n"
                )
                server = RedisServer(
                    master.binary, config_file=str(conf), extra_args=("--sentinel",)
                )
                self.servers.append(server)
                server.start()
        except BaseException:
            self.stop()
            raise

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    @property
    def spec(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def master_port(self) -> int:
        for port in self.ports:
            try:
                with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as s:
                    addr = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
                    if addr:
                        return int(addr[1])
            except redis.ConnectionError:
                continue
        return 0

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
