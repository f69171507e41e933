"""Counting what a redis-py client sends, without changing its type (instance attributes)."""

from __future__ import annotations

from typing import Any

import redis


def counting_commands(client: redis.Redis) -> list[str]:
    """Record the name of each command the client's ordinary path sends."""
    seen: list[str] = []
    ordinary = client.execute_command

    def execute_command(*args: Any, **options: Any) -> Any:
        seen.append(str(args[0]))
        return ordinary(*args, **options)

    client.execute_command = execute_command  # type: ignore[method-assign]
    return seen


def count_writes(client: redis.Redis) -> list[int]:
    """Socket writes per borrowed connection: one entry per borrow, in order."""
    writes: list[int] = []
    wrapped: set[int] = set()
    pool = client.connection_pool
    borrow = pool.get_connection

    def get_connection(*args: Any, **kwargs: Any) -> Any:
        conn = borrow(*args, **kwargs)
        writes.append(0)
        if id(conn) not in wrapped:
            wrapped.add(id(conn))
            sends = conn.send_packed_command

            def send_packed_command(command: Any, check_health: bool = True) -> None:
                writes[-1] += 1
                sends(command, check_health)

            conn.send_packed_command = send_packed_command
        return conn

    pool.get_connection = get_connection  # type: ignore[method-assign]
    return writes
