"""The suite itself, run as a user runs it: what it may and may not touch.

Each case runs pytest in a subprocess on a few quick tests, with the environment a user
might have, against a private server holding a sentinel key the suite did not write.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import pytest

from cronlock.testing import RedisServer
from tests import procs
from tests.history import ROOT

pytestmark = pytest.mark.slow

# Quick tests that flush their database (redis_url, client) and one that sets REDIS_URL.
SELECTION = [
    "tests/integration/test_server_harness.py::test_every_script_loads_into_a_real_server",
    "tests/integration/test_exclusive.py",
]


def _pytest(env: dict[str, str]) -> tuple[int, str]:
    out = procs.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *SELECTION],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.returncode, out.stdout + out.stderr


def _base_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("CRONLOCK_TEST_REDIS_URL", "REDIS_URL", "CRONLOCK_REDIS_URL")
        and not k.startswith("PYTEST_")
    }


def test_an_exported_redis_url_is_neither_used_nor_flushed(
    server_factory: Callable[..., RedisServer],
) -> None:
    """REDIS_URL (and CRONLOCK_REDIS_URL) exported for an application: the run passes,
    nothing runs against that server, and its keys survive."""
    users = server_factory()
    users.client().set("users:sentinel", "keep me")
    env = {**_base_env(), "REDIS_URL": users.url, "CRONLOCK_REDIS_URL": users.url}
    code, output = _pytest(env)
    assert code == 0, output
    with users.client() as c:
        assert c.get("users:sentinel") == b"keep me"
        assert c.dbsize() == 1, output


def test_a_test_server_holding_foreign_keys_is_refused(
    server_factory: Callable[..., RedisServer],
) -> None:
    """CRONLOCK_TEST_REDIS_URL at a database with keys the suite did not write: its tests
    are skipped with the reason, the private-server tests pass, the keys survive."""
    users = server_factory()
    users.client().set("users:sentinel", "keep me")
    code, output = _pytest({**_base_env(), "CRONLOCK_TEST_REDIS_URL": users.url})
    assert code == 0, output
    assert "keys the suite did not write" in output
    with users.client() as c:
        assert c.get("users:sentinel") == b"keep me"
        assert c.dbsize() == 1


def test_an_empty_test_server_is_used(server_factory: Callable[..., RedisServer]) -> None:
    """CRONLOCK_TEST_REDIS_URL at an empty database: the client tests also run there."""
    spare = server_factory()
    code, output = _pytest({**_base_env(), "CRONLOCK_TEST_REDIS_URL": spare.url})
    assert code == 0, output
    assert "skipped" not in output, output
    with spare.client() as c:
        calls = c.info("commandstats")
    assert calls.get("cmdstat_evalsha", {}).get("calls", 0) > 0  # cronlock ran there
