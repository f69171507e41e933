"""Where shared state lives: the [`Store`][cronlock.stores.Store] protocol and its implementations.

[`RedisStore`][cronlock.stores.RedisStore] (Redis, Valkey, Sentinel, Cluster) and
[`SqliteStore`][cronlock.stores.SqliteStore] (one SQLite file shared by the processes of
one host) and `PostgresStore` (PostgreSQL tables; needs the ``postgres`` extra, so it is
imported when first named) hold the same jobs with the same guarantees; docs/stores.md
compares them.

A redis-py client given to [`CronRunner`][cronlock.runner.CronRunner] or
[`Admin`][cronlock.admin.Admin] becomes a [`RedisStore`][cronlock.stores.RedisStore];
a store may also be passed directly, or named by a URL
([`from_url`][cronlock.stores.from_url]):

```python
from cronlock.stores import RedisStore, from_url

runner = CronRunner(RedisStore(client, prefix="myapp"), prefix="myapp")
admin = Admin(from_url("redis+sentinel://s1:26379/mymaster/0", prefix="myapp"))
```
"""

from __future__ import annotations

from typing import Any, Optional

from cronlock.errors import ConfigurationError
from cronlock.stores.base import Restorable, Store, Subscription
from cronlock.stores.locks import store_lock
from cronlock.stores.redis import RedisStore
from cronlock.stores.sql import SqlStore
from cronlock.stores.sqlite import SqliteStore
from cronlock.stores.types import ClaimReply, ClaimStatus, HistoryEntry, TriggerReply, TriggerStatus
from cronlock.stores.urls import from_url

__all__ = [
    "ClaimReply",
    "ClaimStatus",
    "HistoryEntry",
    "PostgresStore",
    "RedisStore",
    "Restorable",
    "SqlStore",
    "SqliteStore",
    "Store",
    "Subscription",
    "TriggerReply",
    "TriggerStatus",
    "as_store",
    "from_url",
    "store_lock",
]


def __getattr__(name: str) -> Any:
    """``PostgresStore``, imported on first use: psycopg is an optional dependency."""
    if name == "PostgresStore":
        from cronlock.stores.postgres import PostgresStore  # noqa: PLC0415 - optional extra

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def as_store(store_or_client: Any, prefix: Optional[str] = None) -> Store:
    """A `Store` as given, or a `RedisStore` on a redis-py client and ``prefix``.

    ``prefix`` None means the store's own (``"cronlock"`` for a client); a store given
    with another prefix is refused (a runner and its store name one namespace).
    """
    if isinstance(store_or_client, RedisStore) or _is_store(store_or_client):
        if prefix is not None and store_or_client.prefix != prefix:
            raise ConfigurationError(
                f"prefix={prefix!r} differs from the store's prefix {store_or_client.prefix!r}"
            )
        store: Store = store_or_client
        return store
    return RedisStore(store_or_client, "cronlock" if prefix is None else prefix)


def _is_store(value: Any) -> bool:
    """Duck-typed: a redis-py client has none of these, a store has them all."""
    return all(hasattr(value, name) for name in ("claim_slots", "take_trigger", "errors"))
