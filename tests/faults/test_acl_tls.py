"""The minimal Redis ACL cronlock needs, and ``rediss://`` (TLS).

``ACL_RULES`` below is the rule set documented in docs/guarantees.md ("Least
privilege"): the commands a client sends (``EVALSHA``, ``SCRIPT LOAD`` after a
``NOSCRIPT``, ``BLPOP`` for lock waiters) plus every command the shipped Lua scripts
call - Redis checks commands run inside a script against the calling user too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import redis
from redis.exceptions import NoPermissionError

from cronlock import CronRunner, JobContext, redis_lock
from cronlock._scripts import SCRIPTS_DIR
from cronlock.errors import LockNotAcquired
from cronlock.schedules import IntervalSchedule
from cronlock.testing import RedisServer, wait_until

CLIENT_COMMANDS = ["evalsha", "script|load", "blpop"]
SCRIPT_COMMANDS = [
    "type", "time", "exists", "get", "set", "del", "pexpire", "pttl",
    "hget", "hmget", "hset", "hdel", "hkeys", "hincrby",
    "lpush", "lpop", "zadd", "zrange", "zrangebyscore", "zrem", "xadd", "xtrim",
]  # fmt: skip
# What a started runner's operations thread sends besides scripts: heartbeats, the job
# registry, trigger and schedule checks, and the events channel (handovers, triggers).
RUNNER_COMMANDS = ["ping", "hgetall", "hsetnx", "smembers", "srem", "publish", "subscribe"]
PREFIX = "app"


def acl_rules(
    commands: list[str], keys: str = f"~{PREFIX}:*", channels: str = f"&{PREFIX}:events"
) -> list[str]:
    """``ACL SETUSER cronlock on >pw resetkeys <keys> resetchannels <channels> -@all +cmd``"""
    head = ["on", ">pw", "resetkeys", keys, "resetchannels", channels, "-@all"]
    return head + [f"+{c}" for c in commands]


ACL_RULES = acl_rules(CLIENT_COMMANDS + RUNNER_COMMANDS + SCRIPT_COMMANDS)


@pytest.fixture
def acl_server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


def _as_user(server: RedisServer, rules: list[str]) -> redis.Redis:
    with server.client() as admin:
        admin.execute_command("ACL", "DELUSER", "cronlock")
        admin.execute_command("ACL", "SETUSER", "cronlock", *rules)
    return server.client(username="cronlock", password="pw", socket_timeout=5)


def _exercise(client: redis.Redis) -> list[BaseException]:
    """Claim, run (with a renewal), finish; lock acquire, renew, wait, wake, release."""
    errors: list[BaseException] = []
    ran: list[int] = []
    runner = CronRunner(client, prefix=PREFIX, on_error=lambda e, c: errors.append(e))

    def handler(ctx: JobContext) -> None:
        ctx.cancelled.wait(0.3)  # long enough for a renewal (every ttl / 3)
        ran.append(ctx.fencing_token)

    runner.add_job(handler, IntervalSchedule(3600), key="job", ttl=0.3, catch_up=3600)
    runner.run_pending()
    if not ran and not errors:
        errors.append(AssertionError("the job did not run"))
    try:
        with redis_lock(client, "res", ttl=1, prefix=PREFIX, renew=True) as held:
            waiter: list[Any] = []

            def wait() -> None:
                try:
                    with redis_lock(client, "res", ttl=1, wait=5, prefix=PREFIX) as lock:
                        waiter.append(lock.fencing_token)
                except (LockNotAcquired, redis.RedisError) as exc:
                    waiter.append(exc)

            thread = threading.Thread(target=wait)
            thread.start()
            threading.Event().wait(0.5)  # the holder renews meanwhile
            assert held.fencing_token
        thread.join(10)
        if not waiter or isinstance(waiter[0], BaseException):
            errors.append(waiter[0] if waiter else AssertionError("waiter never woke"))
    except redis.RedisError as exc:
        errors.append(exc)
    return errors


def test_every_command_the_scripts_call_is_in_the_acl() -> None:
    """The documented ACL lists every command any shipped Lua script calls."""
    called = set()
    for path in SCRIPTS_DIR.glob("*.lua"):
        called |= {c.lower() for c in re.findall(r"redis\.call\('(\w+)'", path.read_text())}
    assert called <= set(SCRIPT_COMMANDS), sorted(called - set(SCRIPT_COMMANDS))


def test_runner_and_lock_work_under_exactly_the_minimal_acl(acl_server: RedisServer) -> None:
    """Under a user with exactly ACL_RULES, jobs run (claim, renew, finish) and locks are
    acquired, renewed, waited for, handed over and released."""
    client = _as_user(acl_server, ACL_RULES)
    assert _exercise(client) == []


def test_started_runners_work_under_the_minimal_acl_with_no_permission_error(
    acl_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Threaded runners under exactly ACL_RULES: heartbeats, registry, polling and a
    handover announced on the events channel all work, and nothing is refused."""
    client = _as_user(acl_server, ACL_RULES)
    errors: list[BaseException] = []
    started, release = threading.Event(), threading.Event()
    taken: list[int] = []
    runners = [
        CronRunner(client, prefix=PREFIX, poll_interval=0.3, on_error=lambda e, c: errors.append(e))
        for _ in range(2)
    ]

    def slow(ctx: JobContext) -> None:
        started.set()
        release.wait(30)

    runners[0].add_job(slow, IntervalSchedule(3600), key="long", ttl=60, catch_up=3600)
    runners[1].add_job(
        lambda ctx: taken.append(ctx.attempt),
        IntervalSchedule(3600),
        key="long",
        ttl=60,
        catch_up=3600,
    )
    runners[0].start()
    assert started.wait(10)
    runners[1].start()
    try:
        wait_until(lambda: runners[1]._ops.listening, timeout=10)
        threading.Event().wait(1.0)  # a few polls: heartbeat, registry, triggers
        runners[0].stop(timeout=0.2)  # handed over and announced on the events channel
        wait_until(lambda: taken, timeout=10)  # the 60 s lease was not waited for
    finally:
        release.set()
        runners[1].stop(timeout=5)
    assert taken == [2]
    assert errors == []
    refused = [
        r for r in caplog.records if "NOPERM" in r.getMessage() or "permission" in r.getMessage()
    ]
    assert refused == []


@pytest.mark.parametrize(
    ("rules", "missing"),
    [
        (acl_rules([*SCRIPT_COMMANDS, "script|load", "blpop"]), "evalsha"),
        (
            acl_rules(CLIENT_COMMANDS + [c for c in SCRIPT_COMMANDS if c != "hset"]),
            "can't run this command",
        ),
        (
            acl_rules(CLIENT_COMMANDS + [c for c in SCRIPT_COMMANDS if c != "time"]),
            "can't run this command",
        ),
        (acl_rules(CLIENT_COMMANDS + SCRIPT_COMMANDS, keys="~other:*"), "key"),
    ],
    ids=["no-evalsha", "no-hset-in-script", "no-time-in-script", "wrong-key-pattern"],
)
def test_less_than_the_minimal_acl_fails_clearly(
    acl_server: RedisServer, rules: list[str], missing: str
) -> None:
    """With a command or the key pattern missing, the job does not run and the error is
    Redis's permission error (naming the command or key; inside a script Redis names the
    script line), reported to on_error or raised, never swallowed."""
    client = _as_user(acl_server, rules)
    errors = _exercise(client)
    assert errors
    # NOPERM for a client command; a script error quoting NOPERM for one inside a script
    assert all(isinstance(e, (NoPermissionError, redis.ResponseError)) for e in errors), errors
    assert missing in str(errors[0]).lower(), errors[0]


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[RedisServer]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server = RedisServer()
    tls_port = server.port
    server.port = 0  # plain TCP off: only TLS
    server.extra_args = (
        "--tls-port", str(tls_port), "--tls-cert-file", str(cert),
        "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
    )  # fmt: skip
    try:
        proc = subprocess.Popen(
            [server.binary, "--port", "0", "--bind", "127.0.0.1", "--save", "",
             "--dir", server.dir, *server.extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        server.process = proc  # type: ignore[assignment]
        server.port = tls_port
        client = redis.Redis.from_url(
            f"rediss://127.0.0.1:{tls_port}/0", ssl_ca_certs=str(cert), socket_timeout=2
        )
        for _ in range(200):
            if proc.poll() is not None:
                pytest.skip(f"this redis-server has no TLS support: {proc.stdout.read()[:200]}")  # type: ignore[union-attr]
            try:
                client.ping()
                break
            except redis.ConnectionError:
                threading.Event().wait(0.05)
        server.cert = str(cert)  # type: ignore[attr-defined]
        yield server
    finally:
        server.stop()


def test_rediss_tls(tls_server: RedisServer) -> None:
    """Over ``rediss://`` (TLS only, plain port off) jobs and locks work unchanged."""
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    client = redis.Redis.from_url(url, ssl_ca_certs=tls_server.cert, socket_timeout=5)  # type: ignore[attr-defined]
    assert _exercise(client) == []
