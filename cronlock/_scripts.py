"""Every Lua script cronlock runs, loaded from ``cronlock/scripts/*.lua``.

Each ``.lua`` file starts with a header listing its KEYS, ARGV and reply. Scripts are
run by SHA (``EVALSHA``); the source is sent only when the server answers NOSCRIPT
(after ``SCRIPT FLUSH``, a restart or a failover), so a call costs one round trip.
Keys and arguments always travel as KEYS/ARGV: nothing user-supplied is ever pasted
into script text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

from redis.exceptions import NoScriptError

from cronlock import _wire

SCRIPTS_DIR = Path(__file__).with_name("scripts")

Arg = Union[str, int, float, bytes]


class Script:
    """One Lua script, called by SHA with a transparent reload on NOSCRIPT.

    On a plain ``redis.Redis`` a call takes the lean path (`cronlock._wire`): the
    ``EVALSHA`` is packed here, its constant head once per script.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = (SCRIPTS_DIR / f"{name}.lua").read_text(encoding="utf-8")
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()
        self._head = _wire.bulk(b"EVALSHA") + _wire.bulk(self.sha.encode("ascii"))

    def __call__(self, client: Any, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run the script on ``client`` (a Redis or RedisCluster); one round trip."""
        pool = _wire.lean_pool(client)
        if pool is not None:
            packed = self.pack(keys, args)
            try:
                return _wire.call(pool, packed)
            except NoScriptError:
                client.script_load(self.source)
                return _wire.call(pool, packed)
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)

    def pack(self, keys: Sequence[str], args: Sequence[Arg]) -> bytes:
        """This script's ``EVALSHA`` with these KEYS and ARGV, as bytes for `cronlock._wire`.

        Written out flat (no call per argument): a finish has 14 arguments, and a burst
        of 1,000 runs packs 2,000 calls.
        """
        parts = [
            b"*%d\r\n" % (3 + len(keys) + len(args)),
            self._head,
            _wire.bulk(b"%d" % len(keys)),
        ]
        for key in keys:
            data = key.encode("utf-8")
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        for arg in args:
            if type(arg) is str:
                data = arg.encode("utf-8")
            elif type(arg) is int:
                data = b"%d" % arg
            else:  # bytes, floats, str subclasses; refuses a bool
                data = _wire.encode(arg)
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        return b"".join(parts)

    def call_many(
        self,
        client: Any,
        calls: Sequence[tuple[Sequence[str], Sequence[Arg]]],
        tail: Optional[bytes] = None,
    ) -> Optional[list[Any]]:
        """Run the script once per (KEYS, ARGV) in one write, on the lean path only.

        Each reply, or the server error in its place. ``tail``, a packed command (a
        ``WAIT``), ends the write and its reply the list; calls refused with NOSCRIPT (so
        not run) are sent again once after loading the script, followed by ``tail``
        again so that its reply covers them. None when ``client`` does not take the lean
        path: then pipeline with `queue` and `execute_pipeline`.
        """
        pool = _wire.lean_pool(client)
        if pool is None:
            return None
        tails = [tail] if tail is not None else []
        packed = [self.pack(keys, args) for keys, args in calls]
        replies = _wire.call_many(pool, packed + tails)
        missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        if missing:
            client.script_load(self.source)
            again = _wire.call_many(pool, [packed[i] for i in missing] + tails)
            for i, reply in zip(missing + ([len(packed)] if tails else []), again):
                replies[i] = reply
        return replies

    def queue(self, pipe: Any, keys: Sequence[str], args: Sequence[Arg]) -> None:
        """Add a call to a pipeline; run it with `execute_pipeline`."""
        pipe.evalsha(self.sha, len(keys), *keys, *args)

    def __repr__(self) -> str:
        return f"Script({self.name!r}, sha={self.sha[:10]})"


def execute_pipeline(
    client: Any, pipe: Any, scripts: Sequence[Script], *, repeat_last: bool = False
) -> list[Any]:
    """Execute a pipeline of script calls; errors come back as exception objects in place.

    Calls that failed with NOSCRIPT (nothing ran for them) are re-sent once after
    loading the scripts, so the caller sees each call's real reply or error. With
    ``repeat_last``, the pipeline's last command (a ``WAIT`` for the writes before it)
    is sent again after those, so its reply covers the re-sent calls too.
    """
    stack = list(pipe.command_stack)
    results = list(pipe.execute(raise_on_error=False))
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing and repeat_last:
        missing.append(len(stack) - 1)
    if missing:
        for script in {s.sha: s for s in scripts}.values():
            client.script_load(script.source)
        retry = client.pipeline(transaction=False)
        for i in missing:
            entry = stack[i]  # a tuple in redis.Redis pipelines, an object in cluster ones
            args, options = (entry.args, entry.options) if hasattr(entry, "args") else entry
            retry.execute_command(*args, **options)
        for i, r in zip(missing, retry.execute(raise_on_error=False)):
            results[i] = r
    return results


def text(value: Any) -> str:
    """A reply element as ``str``, whatever ``decode_responses`` is."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


def all_scripts() -> list[Script]:
    """Every script shipped, for the test that loads each one into a real server."""
    return [Script(p.stem) for p in sorted(SCRIPTS_DIR.glob("*.lua"))]
