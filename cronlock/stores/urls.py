"""`from_url`: one URL names the store, whichever it is.

| URL                                                   | store                             |
|-------------------------------------------------------|-----------------------------------|
| ``redis://``, ``rediss://``, ``unix://``              | `RedisStore` on ``redis.Redis``   |
| ``valkey://``, ``valkeys://``                         | the same (Valkey's spelling)      |
| ``redis://host:7000?cluster=true``                    | `RedisStore` on ``RedisCluster``  |
| ``redis+sentinel://host:26379[,host:port]/SERVICE/0`` | `RedisStore` on the Sentinel master |
| ``postgresql://``, ``postgres://`` (``?schema=``)     | ``PostgresStore``                 |
| ``sqlite:///relative.db``, ``sqlite:////absolute.db`` | ``SqliteStore``                   |

Bad input is refused before anything is written, with a `ConfigurationError` naming the
URL (its password masked): an unknown scheme, a SQLite file whose directory does not
exist, a PostgreSQL URL without a database. The Redis forms are those of
`cronlock.client_from_url`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from cronlock._redisurl import SCHEMES, SENTINEL_SCHEMES, client_from_url, masked, scheme_of
from cronlock._validate import check_prefix
from cronlock.errors import ConfigurationError
from cronlock.stores.base import Store
from cronlock.stores.redis import RedisStore

__all__ = ["POSTGRES_SCHEMES", "SQLITE_OPTIONS", "STORE_SCHEMES", "from_url", "is_redis_url"]

POSTGRES_SCHEMES = ("postgresql", "postgres")
#: Every scheme `from_url` accepts.
STORE_SCHEMES: tuple[str, ...] = (*SCHEMES, *SENTINEL_SCHEMES, *POSTGRES_SCHEMES, "sqlite")
#: Query parameters a ``sqlite://`` URL may carry, and how each is read.
SQLITE_OPTIONS = {"busy_timeout": float, "create_schema": None}


def is_redis_url(url: str) -> bool:
    """Whether ``url`` names a Redis store (any of its spellings)."""
    return scheme_of(url) in SCHEMES or scheme_of(url) in SENTINEL_SCHEMES


def from_url(url: str, *, prefix: str = "cronlock", **options: Any) -> Store:
    """The store ``url`` names (see the module docstring), with ``prefix``.

    ``options`` go to the store's constructor, or for Redis to the redis-py client
    (``socket_timeout=5``, ``decode_responses=True``, ``cluster=True``, ...).

    Example:
        ```python
        store = from_url(os.environ["CRONLOCK_STORE_URL"], prefix="myapp")
        runner = CronRunner(store, prefix="myapp")
        ```
    """
    if not isinstance(url, str):
        raise TypeError(f"a store URL must be a str; got {url!r}")
    check_prefix(prefix)
    scheme = scheme_of(url)
    if is_redis_url(url):
        return RedisStore(client_from_url(url, **options), prefix)
    if scheme in POSTGRES_SCHEMES:
        dsn, schema = postgres_dsn(url)
        if schema is not None:
            options.setdefault("schema", schema)
        store: Store = _store_class("postgres", "PostgresStore", url)(dsn, prefix, **options)
        return store
    if scheme == "sqlite":
        from cronlock.stores.sqlite import SqliteStore  # noqa: PLC0415 - only when asked for

        path, from_query = sqlite_path(url)
        return SqliteStore(path, prefix, **{**from_query, **options})
    wanted = ", ".join(f"{s}://" for s in STORE_SCHEMES)
    raise ConfigurationError(f"a store URL must start with one of {wanted}; got {masked(url)!r}")


def sqlite_path(url: str) -> tuple[str, dict[str, Any]]:
    """The file of a ``sqlite:///`` URL (SQLAlchemy's reading) and its query options.

    ``sqlite:///jobs.db`` is ``jobs.db`` relative to the working directory,
    ``sqlite:////var/lib/app/jobs.db`` is absolute. An in-memory database is refused:
    it cannot be shared between processes.
    """
    rest = url.partition("://")[2]
    rest, _, query = rest.partition("?")
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        raise ConfigurationError(
            "a SQLite URL names a file: sqlite:///relative/jobs.db or "
            f"sqlite:////absolute/jobs.db (an in-memory database is not shared); got {url!r}"
        )
    path = unquote(rest[1:])
    options: dict[str, Any] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in SQLITE_OPTIONS:
            raise ConfigurationError(
                f"unknown SQLite URL parameter {name!r} (known: {', '.join(SQLITE_OPTIONS)}); "
                f"got {url!r}"
            )
        options[name] = _sqlite_option(name, value, url)
    directory = Path(path).parent
    if not directory.is_dir():
        raise ConfigurationError(
            f"the SQLite database {path!r} cannot be created: directory {str(directory)!r} "
            f"does not exist (from {url!r})"
        )
    return path, options


def _sqlite_option(name: str, value: str, url: str) -> Any:
    if name == "busy_timeout":
        try:
            return float(value)
        except ValueError:
            raise ConfigurationError(
                f"busy_timeout={value!r} must be seconds; got it in {url!r}"
            ) from None
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name}={value!r} must be true or false; got it in {url!r}")


def postgres_dsn(url: str) -> tuple[str, Any]:
    """``url`` without its ``schema`` query parameter, and that parameter (None: absent).

    The DSN must name a database (its path, or ``dbname=``): libpq would otherwise pick
    the user's name, which is seldom what was meant.
    """
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for name, value in pairs if name == "schema"]
    if len(schemas) > 1 or (schemas and not schemas[0]):
        raise ConfigurationError(f"give schema= once, non-empty; got {masked(url)!r}")
    database = unquote(parts.path.lstrip("/")) or dict(pairs).get("dbname")
    if not database:
        raise ConfigurationError(
            "a PostgreSQL URL must name its database (postgresql://USER@HOST/DATABASE); "
            f"got {masked(url)!r}"
        )
    query = urlencode([(name, value) for name, value in pairs if name != "schema"])
    base = url.partition("?")[0]  # not urlunsplit: it drops the empty host of postgresql:///db
    return base + ("?" + query if query else ""), (schemas[0] if schemas else None)


def _store_class(module: str, name: str, url: str) -> Any:
    """``cronlock.stores.MODULE.NAME``, imported when first asked for.

    By name, not by an import statement: the PostgreSQL store needs psycopg, which is an
    extra, and its module is not in every version.
    """
    try:
        found = importlib.import_module(f"cronlock.stores.{module}")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith("cronlock"):
            raise ConfigurationError(
                f"this version of cronlock has no {name}, so it cannot open {masked(url)!r}"
            ) from None
        extra = " (pip install 'cronlock-redis[postgres]')" if module == "postgres" else ""
        raise ConfigurationError(
            f"{name} needs the {error.name!r} package{extra} to open {masked(url)!r}"
        ) from None
    return getattr(found, name)
