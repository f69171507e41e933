"""What a `PostgresStore` is told, checked before anything connects.

A DSN (a libpq URL or ``key=value`` string) must name its database: libpq would
otherwise take the user's name, seldom what was meant. A schema name must be a plain
identifier, so every table name is ``"<schema>".name`` without further quoting. The
wake-up channel is named after schema and prefix, within PostgreSQL's 63 bytes.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cronlock.errors import ConfigurationError

__all__ = ["MAX_IDENTIFIER", "channel_name", "check_dsn", "check_schema", "masked_dsn"]

#: PostgreSQL truncates identifiers (and channel names) longer than this many bytes.
MAX_IDENTIFIER = 63
_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_dsn(dsn: Any) -> dict[str, Any]:
    """The DSN's parameters; refused when it is not a connection string or names no database."""
    if not isinstance(dsn, str):
        raise ConfigurationError(
            f"a PostgreSQL store takes a DSN (str) or a psycopg_pool.ConnectionPool; got {dsn!r}"
        )
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"not a PostgreSQL connection string: {masked_dsn(dsn)!r} ({exc})"
        ) from None
    if not params.get("dbname"):
        raise ConfigurationError(
            "the PostgreSQL DSN must name its database (postgresql://USER@HOST/DATABASE or "
            f"dbname=DATABASE); got {masked_dsn(dsn)!r}"
        )
    return params


def check_schema(schema: Any) -> str:
    """A schema name cronlock may create and quote as it is."""
    if not isinstance(schema, str):
        raise ConfigurationError(f"schema must be a str; got {schema!r}")
    if (
        not _SCHEMA.match(schema)
        or len(schema) > MAX_IDENTIFIER
        or schema.lower().startswith("pg_")
    ):
        raise ConfigurationError(
            f"schema={schema!r} is not accepted: use letters, digits and underscores, starting "
            f"with a letter or underscore, at most {MAX_IDENTIFIER} characters, not starting "
            "with pg_ (reserved by PostgreSQL)"
        )
    return schema


def masked_dsn(dsn: str) -> str:
    """``dsn`` with its password removed, for messages (unparsable: only its host part)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        _, at, rest = dsn.rpartition("@")
        return ("***@" + rest) if at else "<unparsable DSN>"
    params.pop("password", None)
    return str(make_conninfo("", **params))


def channel_name(schema: str, prefix: str) -> str:
    """The LISTEN/NOTIFY channel of one schema and prefix (a hash when the name is too long)."""
    name = f"cronlock:{schema}:{prefix}"
    if len(name.encode()) <= MAX_IDENTIFIER:
        return name
    digest = hashlib.sha256(f"{schema}\0{prefix}".encode()).hexdigest()[:24]
    return f"cronlock:{digest}"
