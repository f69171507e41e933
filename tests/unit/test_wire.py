"""The lean path's packing writes exactly the bytes redis-py's own packer writes."""

from __future__ import annotations

import pytest
import redis
from redis.connection import Connection

from cronlock import _wire
from cronlock._scripts import Script

CLAIM = Script("job_claim")


@pytest.mark.parametrize(
    ("keys", "args"),
    [
        ([], []),
        (["cronlock:job:{a}"], [1796149280000, "owner", 60000, 1, "skip", "host:1:r"]),
        (["k:{é}", "k:{é}:h"], ["naïve ☃", 0, -3, 2.5, 1e-7, b"\x00\xff"]),
        (["k"], ["x" * 10_000]),
    ],
)
def test_a_script_call_packs_as_redis_py_packs_it(keys: list[str], args: list[object]) -> None:
    expected = b"".join(Connection().pack_command("EVALSHA", CLAIM.sha, len(keys), *keys, *args))
    assert CLAIM.pack(keys, args) == expected  # type: ignore[arg-type]


def test_a_bool_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match="True"):
        _wire.encode(True)


def test_an_unsendable_value_is_refused_naming_its_type() -> None:
    with pytest.raises(TypeError, match="list"):
        _wire.encode([1])  # type: ignore[arg-type]


def test_only_plain_clients_with_a_plain_pool_take_the_lean_path() -> None:
    class Counting(redis.Redis):
        pass

    plain = redis.Redis(port=1)
    assert _wire.lean_pool(plain) is plain.connection_pool
    assert _wire.lean_pool(Counting(port=1)) is None  # a subclass may override commands
    assert _wire.lean_pool(redis.Redis(port=1, encoding="latin-1")) is None
    assert _wire.lean_pool(None) is None
