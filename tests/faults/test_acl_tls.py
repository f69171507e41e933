"""The minimal Redis ACL cronlock needs, and ``rediss://`` (TLS).

``ACL_RULES`` below is the rule set documented in docs/guarantees.md ("Least
privilege"): the commands a client sends (``EVALSHA``, ``SCRIPT LOAD`` after a
``NOSCRIPT``, ``BLPOP`` for lock waiters) plus every command the shipped Lua scripts
call - Redis checks commands run inside a script against the calling user too.
"""

from __future__ import annotations

import hashlib
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
from cronlock.testing._server import START_ATTEMPTS
from tests import procs

CLIENT_COMMANDS = ["evalsha", "script|load", "blpop"]
SCRIPT_COMMANDS = [
    "type", "time", "exists", "get", "set", "del", "pexpire", "pttl",
    "hget", "hmget", "hset", "hdel", "hkeys", "hincrby",
    "lpush", "lpop", "zadd", "zrange", "zrangebyscore", "zrem", "xadd", "xtrim",
    "publish",  # job_finish: a watched slot's finish wakes its watchers
]  # fmt: skip
# What a started runner's operations thread sends besides scripts: heartbeats, the job
# registry, trigger and schedule checks, and the events channel (handovers, triggers);
# sadd and incr when it restores pauses after Redis lost them, or pauses a job registered
# during pause-all.
RUNNER_COMMANDS = [
    "ping", "hgetall", "hsetnx", "smembers", "srem", "sadd", "incr", "publish", "subscribe",
]  # fmt: skip
PREFIX = "app"


def acl_rules(
    commands: list[str], keys: str = f"~{PREFIX}:*", channels: str = f"&{PREFIX}:events"
) -> list[str]:
    """``ACL SETUSER cronlock on >pw resetkeys <keys> resetchannels <channels> -@all +cmd``"""
    head = ["on", ">pw", "resetkeys", keys, "resetchannels", channels, "-@all"]
    return head + [f"+{c}" for c in commands]


ACL_RULES = acl_rules(sorted(set(CLIENT_COMMANDS + RUNNER_COMMANDS + SCRIPT_COMMANDS)))


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


def _acl_denials(server: RedisServer) -> set[tuple[str, str, str]]:
    """What the server refused user ``cronlock``: ``(reason, context, object)`` from
    ``ACL LOG`` (structured fields, the same on Redis 7 and Valkey 8). The CLIENT SETINFO
    redis-py sends on connect (refused on Valkey, ignored by redis-py) is left out."""
    with server.client(decode_responses=True) as admin:
        entries = admin.execute_command("ACL", "LOG")
    return {
        (e["reason"], e["context"], e["object"])
        for e in entries
        if e["username"] == "cronlock" and e["object"] != "client|setinfo"
    }


def _script_line(error: BaseException) -> str:
    """The line of the shipped script an in-script error points at (``script: SHA, on
    @user_script:N``), or "" when it points at none."""
    found = re.search(r"script: ([0-9a-f]{40}), on @user_script:(\d+)", str(error))
    if not found:
        return ""
    sha, line = found.group(1), int(found.group(2))
    for path in SCRIPTS_DIR.glob("*.lua"):
        source = path.read_text(encoding="utf-8")
        if hashlib.sha1(source.encode("utf-8")).hexdigest() == sha:
            return source.splitlines()[line - 1]
    return ""


@pytest.mark.parametrize(
    ("rules", "error_type", "denied"),
    [
        (
            acl_rules([*SCRIPT_COMMANDS, "script|load", "blpop"]),
            NoPermissionError,
            ("command", "toplevel", "evalsha"),
        ),
        (
            acl_rules(CLIENT_COMMANDS + [c for c in SCRIPT_COMMANDS if c != "hset"]),
            redis.ResponseError,
            ("command", "lua", "hset"),
        ),
        (
            acl_rules(CLIENT_COMMANDS + [c for c in SCRIPT_COMMANDS if c != "time"]),
            redis.ResponseError,
            ("command", "lua", "time"),
        ),
        (
            acl_rules(CLIENT_COMMANDS + SCRIPT_COMMANDS, keys="~other:*"),
            NoPermissionError,
            ("key", "toplevel", f"{PREFIX}:job:{{job}}"),
        ),
    ],
    ids=["no-evalsha", "no-hset-in-script", "no-time-in-script", "wrong-key-pattern"],
)
def test_less_than_the_minimal_acl_fails_clearly(
    acl_server: RedisServer,
    rules: list[str],
    error_type: type[redis.ResponseError],
    denied: tuple[str, str, str],
) -> None:
    """With a command or the key pattern missing, the job does not run and the server's
    permission error reaches on_error or the caller, never swallowed: NOPERM for a client
    command or key, a script error for a command inside a script, naming the command or
    the shipped script line that calls it. The server's ACL LOG shows it refused exactly
    what is missing. Nothing depends on the server's wording (Redis 7.0 and Valkey 8.1
    word these errors differently)."""
    client = _as_user(acl_server, rules)
    with acl_server.client() as admin:
        admin.execute_command("ACL", "LOG", "RESET")
    errors = _exercise(client)
    assert errors
    assert all(isinstance(e, redis.ResponseError) for e in errors), errors
    assert type(errors[0]) is error_type, errors[0]
    assert denied in _acl_denials(acl_server)
    _, context, name = denied
    if context == "lua":
        # Valkey names the command; Redis 7.0 names only the script line that calls it.
        assert f"'{name}'" in str(errors[0]).lower() or re.search(
            rf"redis\.call\('{name}'", _script_line(errors[0]), flags=re.IGNORECASE
        ), errors[0]


def _skip_unless_tls_is_missing(binary: str, output: str) -> None:
    """The TLS server exited: skip if it says it has no TLS support, else fail with why.

    The skip reason is the server's own lines about TLS (Valkey's embedded build logs
    "Failed finding TLS support."), not the first lines of its log, which are warnings
    about unrelated things such as memory overcommit."""
    messages = [
        re.sub(r"^\d+:\w \d+ \w+ \d+ [\d:.]+ [#*.-] ", "", line) for line in output.splitlines()
    ]
    about_tls = [m for m in messages if "tls" in m.lower()]
    if about_tls:
        pytest.skip(f"{Path(binary).name} was built without TLS support: {' '.join(about_tls)}")
    pytest.fail(f"{binary} with TLS options exited without naming TLS: {output[-1000:]}")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[RedisServer]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    procs.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = RedisServer()
    server.cert = str(cert)  # type: ignore[attr-defined]
    proc = None
    try:
        for attempt in range(START_ATTEMPTS):  # a new port if another process took ours
            server.port = server.port_picker()
            log = tmp_path / f"server-{attempt}.log"
            with log.open("w") as out:
                proc = procs.spawn(
                    [server.binary, "--port", "0",  # plain TCP off: only TLS
                     "--bind", "127.0.0.1", "--save", "", "--dir", server.dir,
                     "--tls-port", str(server.port), "--tls-cert-file", str(cert),
                     "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
                     "--tls-auth-clients", "no"],
                    stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            server.process = proc
            # Only a server holding our certificate passes verification: it is ours.
            client = redis.Redis.from_url(
                f"rediss://127.0.0.1:{server.port}/0", ssl_ca_certs=str(cert), socket_timeout=2
            )
            wait_until(lambda p=proc, c=client: p.poll() is not None or _answers(c), timeout=10)
            client.close()
            if proc.poll() is None:
                break
            output = log.read_text()
            if "address already in use" not in output.lower():
                _skip_unless_tls_is_missing(server.binary, output)
        else:
            pytest.fail(f"no TLS port could be bound in {START_ATTEMPTS} attempts")
        yield server
    finally:
        if proc is not None:
            procs.end(proc)
        server.stop()


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_rediss_tls(tls_server: RedisServer) -> None:
    """Over ``rediss://`` (TLS only, plain port off) jobs and locks work unchanged."""
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    client = redis.Redis.from_url(url, ssl_ca_certs=tls_server.cert, socket_timeout=5)  # type: ignore[attr-defined]
    assert _exercise(client) == []
