"""The lean path: script calls as packed bytes on a connection of the caller's own pool.

redis-py's command path spends most of a script call's client CPU on things the hot
scripts do not need: encoding each argument through the generic packer, looking up
response callbacks, and per-call observability hooks. Here a call borrows a connection
from the client's own pool (``get_connection``, so TLS, ACL, health checks and Sentinel
discovery are the pool's), writes bytes packed by `pack`, reads the reply with the
connection's parser (so ``decode_responses`` and RESP3 are the client's), retries as the
connection's ``Retry`` says, and gives the connection back. `lean_pool` says which
clients take it; every other client (cluster, single-connection, client-side caching,
an encoding other than UTF-8, a subclass) goes through redis-py's ordinary path.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Optional, Union

import redis
from redis.exceptions import ResponseError

Arg = Union[str, int, float, bytes]

# redis-py 5 wants the command's name; 6 and later warn when it is given.
_NAME = inspect.signature(redis.ConnectionPool.get_connection).parameters.get("command_name")
NAME_ARGS: tuple[str, ...] = (
    ("EVALSHA",) if _NAME is not None and _NAME.default is inspect.Parameter.empty else ()
)


def encode(value: Arg) -> bytes:
    """One argument as redis-py's encoder writes it (UTF-8 text, ``repr`` of numbers)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):  # redis-py refuses booleans; so do we
        raise TypeError(f"cannot send a bool to Redis: {value!r}")
    if isinstance(value, (int, float)):
        return repr(value).encode("ascii")
    raise TypeError(f"cannot send {type(value).__name__} to Redis: {value!r}")


def bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


def pack(parts: Sequence[bytes]) -> bytes:
    """A whole command (its name and arguments already encoded) in RESP."""
    return b"*%d\r\n" % len(parts) + b"".join([bulk(p) for p in parts])


def lean_pool(client: Any) -> Optional[Any]:
    """The connection pool the lean path may borrow from, or None for redis-py's path."""
    if type(client) is not redis.Redis or getattr(client, "connection", None) is not None:
        return None
    pool = client.connection_pool
    if not isinstance(pool, redis.ConnectionPool) or getattr(pool, "cache", None) is not None:
        return None
    encoding = str(pool.connection_kwargs.get("encoding", "utf-8")).lower()
    return pool if encoding in ("utf-8", "utf8") else None


def call(pool: Any, packed: bytes) -> Any:
    """Send one packed command and return its reply (a server error is raised)."""
    conn = pool.get_connection(*NAME_ARGS)
    try:
        return conn.retry.call_with_retry(
            lambda: _one(conn, packed), lambda _error: conn.disconnect()
        )
    finally:
        pool.release(conn)


def call_many(pool: Any, packed: Sequence[bytes]) -> list[Any]:
    """Send packed commands in one write; each reply, or its server error, in order."""
    conn = pool.get_connection(*NAME_ARGS)
    try:
        return list(
            conn.retry.call_with_retry(
                lambda: read_replies(send(conn, packed), len(packed)),
                lambda _error: conn.disconnect(),
            )
        )
    finally:
        pool.release(conn)


def send(conn: Any, packed: Sequence[bytes]) -> Any:
    """Write commands on ``conn`` in one write; ``conn``, for `read_replies`."""
    conn.send_packed_command([b"".join(packed)])
    return conn


def read_replies(conn: Any, count: int) -> list[Any]:
    """Read ``count`` replies; a server error stands in its reply's place."""
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(conn.read_response())
        except ResponseError as error:
            replies.append(error)
    return replies


def _one(conn: Any, packed: bytes) -> Any:
    conn.send_packed_command([packed])
    return conn.read_response()
