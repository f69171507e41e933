"""Every example under examples/ runs as its README or docstring says, against a real Redis."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

import pytest
import redis

from cronlock import Admin
from cronlock.testing import RedisServer, free_port, wait_until
from tests.history import ROOT

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples"
BIN = str(Path(sys.executable).parent)


@pytest.fixture
def server(server_factory: Callable[..., RedisServer]) -> RedisServer:
    return server_factory()


def _env(server: RedisServer, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "REDIS_URL": server.url,
        "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
        **extra,
    }


def _readme_command(readme: Path, program: str) -> str:
    """The line of the README's first bash block that runs ``program``."""
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(), flags=re.DOTALL)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return next(line for line in lines if line.startswith(program + " "))


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_flask_app_runs_under_gunicorn_from_its_readme(server: RedisServer) -> None:
    """examples/flask_app: the README's gunicorn command serves the dashboard; jobs run once."""
    command = _readme_command(EXAMPLES / "flask_app" / "README.md", "gunicorn")
    port = free_port()
    proc = subprocess.Popen(
        "exec " + command,  # the shell becomes gunicorn: SIGTERM reaches its master
        shell=True,
        cwd=EXAMPLES / "flask_app",
        env=_env(server, PORT=str(port), WEB_CONCURRENCY="2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    admin = Admin(redis.Redis.from_url(server.url), "example-shop")
    try:
        wait_until(lambda: _get(base + "/cronlock/health")[0] == 200, timeout=60, interval=0.2)

        def listed() -> list[str]:
            status, body = _get(base + "/cronlock/api/jobs")
            return sorted(j["key"] for j in json.loads(body)["jobs"]) if status == 200 else []

        # Runners register their jobs in Redis just after they start.
        wait_until(lambda: len(listed()) == 3, timeout=30, interval=0.2)
        assert listed() == ["heartbeat", "nightly-cleanup", "send-digest"]
        status, html = _get(base + "/cronlock/")
        assert status == 200
        for key in listed():
            assert f'data-key="{key}"' in html

        def heartbeats() -> list[object]:
            return [h.slot for h in admin.history("heartbeat", 50) if h.event == "succeeded"]

        wait_until(lambda: len(heartbeats()) >= 2, timeout=30, interval=0.2)
        assert max(Counter(heartbeats()).values()) == 1  # each slot ran once
        # Without CRONLOCK_API_TOKEN the dashboard is read-only: a pause is refused.
        request = urllib.request.Request(
            base + "/cronlock/api/jobs/heartbeat/pause",
            data=b"{}",
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_manage_script_runs_on_one_host_at_a_time(server: RedisServer) -> None:
    """examples/manage.py started twice at once: one rebuilds, the other skips; both exit 0."""
    args = [sys.executable, str(EXAMPLES / "manage.py"), "rebuild-index", "--seconds", "3"]
    procs = [
        subprocess.Popen(args, env=_env(server), stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    outcomes = sorted(out.split(":")[1].split()[0] for out in outputs)
    assert outcomes == ["rebuilt", "skipped"], outputs


def _crontab_command(marker: str) -> str:
    """The command part (after the five schedule fields) of the crontab line with ``marker``."""
    for line in (EXAMPLES / "crontab").read_text().splitlines():
        if marker in line and not line.startswith("#"):
            command = line.split(None, 5)[5]
            return command.replace("/srv/app", str(ROOT))
    raise AssertionError(f"no crontab line with {marker!r}")


def test_crontab_line_with_cronlock_exec_runs_once(server: RedisServer) -> None:
    """The crontab's `cronlock exec` line on two hosts at once: one runs it, both exit 0."""
    command = _crontab_command("cronlock exec")
    command = command.replace("rebuild-index --unguarded", "rebuild-index --unguarded --seconds 3")
    procs = [
        subprocess.Popen(command, shell=True, env=_env(server), stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert sum("rebuild-index: rebuilt" in out for out in outputs) == 1, outputs


def test_worker_runs_slots_once_and_stops_on_sigterm_and_sigint(
    server: RedisServer, tmp_path: Path
) -> None:
    """Two examples/worker.py processes share the slots; SIGTERM and SIGINT stop them cleanly."""
    env = _env(server, WORKER_PREFIX=f"worker-{tmp_path.name}")
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = []
    for log in logs:
        with log.open("w") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(EXAMPLES / "worker.py")],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            )
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"

        def slots() -> list[str]:
            found: list[str] = []
            for log in logs:
                found += re.findall(r"poll-queue slot (\S+)", log.read_text())
            return found

        wait_until(lambda: len(slots()) >= 4, timeout=30, interval=0.2)
    finally:
        procs[0].send_signal(signal.SIGTERM)
        procs[1].send_signal(signal.SIGINT)
        codes: list[Optional[int]] = [p.wait(40) for p in procs]
    assert codes == [0, 0]
    assert max(Counter(slots()).values()) == 1
    for log, name in zip(logs, ("SIGTERM", "SIGINT")):
        text = log.read_text()
        assert f"received {name}" in text
        assert "stopped cleanly" in text
