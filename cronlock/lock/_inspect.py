"""``inspect``: who holds a lock, for operators (reads only)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from cronlock._keys import LockKeys
from cronlock._scripts import Script, text
from cronlock._validate import check_client, check_key, check_prefix

_INSPECT = Script("lock_inspect")


@dataclass(frozen=True)
class LockInfo:
    """Who holds a lock, as [`inspect`][cronlock.lock.inspect] read it (one atomic script)."""

    key: str
    token: str
    holder: Optional[str]
    since: Optional[datetime]
    ttl_remaining: Optional[float]
    fencing_token: Optional[int]


def inspect(client: Any, key: str, prefix: str = "cronlock") -> Optional[LockInfo]:
    """Describe the current holder of ``key``, or None when the lock is free.

    ``holder`` is ``"host:pid"``, ``since`` an aware UTC datetime (Redis's clock),
    ``ttl_remaining`` seconds (None if the key has no expiry, which cronlock never
    writes). Fields are None when the key was not written by cronlock. Changes nothing.
    """
    check_key(key)
    keys = LockKeys.of(check_prefix(prefix), key)
    reply = _INSPECT(check_client(client), [keys.lock, keys.fence], [])
    if not reply:
        return None
    token, pttl, holder, since, fence = reply
    return LockInfo(
        key=key,
        token=text(token),
        holder=None if holder is None else text(holder),
        since=None
        if since is None
        else datetime.fromtimestamp(int(text(since)) / 1_000_000, tz=timezone.utc),
        ttl_remaining=None if int(pttl) < 0 else int(pttl) / 1000,
        fencing_token=None if fence is None else int(text(fence)),
    )
