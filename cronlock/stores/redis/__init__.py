"""The Redis store: every key, Lua script and pipeline of the runner and the operator side."""

from __future__ import annotations

from cronlock.stores.redis.store import RedisStore

__all__ = ["RedisStore"]
