"""Check that a Redis (or Valkey) server can keep cronlock's promises.

The public path of `cronlock.stores.redis.doctor`, where it is defined (the checks
are Redis's own, so they live with the Redis store).
"""

from __future__ import annotations

from cronlock.stores.redis.doctor import (
    MIN_REDIS,
    MIN_VALKEY,
    Check,
    check_server,
    worst_status,
)

__all__ = ["MIN_REDIS", "MIN_VALKEY", "Check", "check_server", "worst_status"]
