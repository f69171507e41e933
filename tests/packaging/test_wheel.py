"""The built sdist and wheel, checked the way a user and a downstream packager meet them.

``python -m build`` turns a clean copy of the checkout into an sdist and then a wheel
built *from that sdist* (so a file missing from the sdist also breaks the wheel). The
wheel is installed in a fresh venv (dependencies from the package index, not this
checkout) and a smoke script runs a CronRunner and a lock against a private server.
"""

from __future__ import annotations

import importlib.util
import runpy
import shutil
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

from cronlock.testing import find_server_binary
from tests.packaging.freshenv import copy_checkout, make_venv, run, venv_env

pytestmark = pytest.mark.slow

DIST_NAME = "cronlock-redis"
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
EXTRAS = {"hiredis", "flask", "embedded", "test", "dev", "docs"}


class Dists:
    """An sdist and a wheel built from one clean copy of the checkout."""

    def __init__(self, source: Path, sdist: Path, wheel: Path) -> None:
        self.source = source
        self.sdist = sdist
        self.wheel = wheel
        self.version: str = runpy.run_path(str(source / "cronlock" / "_version.py"))["__version__"]

    def wheel_names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def wheel_text(self, name: str) -> str:
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.read(name).decode("utf-8")

    def metadata(self) -> Message:
        return Parser().parsestr(self.wheel_text(f"{self.dist_info}/METADATA"))

    @property
    def dist_info(self) -> str:
        return f"cronlock_redis-{self.version}.dist-info"

    def sdist_names(self) -> set[str]:
        root = f"cronlock_redis-{self.version}/"
        with tarfile.open(self.sdist) as archive:
            return {m.name[len(root) :] for m in archive.getmembers() if m.name.startswith(root)}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dists]:
    """Build once per module: ``python -m build`` on a copy, into a temporary dist/."""
    base = tmp_path_factory.mktemp("build")
    source = copy_checkout(base / "src")
    out = base / "dist"
    env = venv_env(Path(sys.prefix))  # this interpreter, minus the test run's variables
    python = sys.executable
    if importlib.util.find_spec("build") is None:  # not in this env: a throwaway venv has it
        tools = make_venv(base / "tools")
        env = venv_env(tools)
        python = str(tools / "bin" / "python")
        run([python, "-m", "pip", "install", "-q", "build"], cwd=base, env=env, timeout=300)
    run([python, "-m", "build", "--outdir", str(out), str(source)], cwd=base, env=env,
        timeout=300)  # fmt: skip
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    yield Dists(source, sdist, wheel)
    shutil.rmtree(base, ignore_errors=True)


def test_wheel_and_sdist_are_named_for_the_single_version(dists: Dists) -> None:
    """Both file names and both metadata files carry the version from cronlock/_version.py."""
    assert dists.wheel.name == f"cronlock_redis-{dists.version}-py3-none-any.whl"
    assert dists.sdist.name == f"cronlock_redis-{dists.version}.tar.gz"
    assert dists.metadata()["Version"] == dists.version
    with tarfile.open(dists.sdist) as archive:
        member = archive.extractfile(f"cronlock_redis-{dists.version}/PKG-INFO")
        assert member is not None
        pkg_info = Parser().parsestr(member.read().decode("utf-8"))
    assert pkg_info["Name"] == DIST_NAME
    assert pkg_info["Version"] == dists.version


def test_wheel_metadata_lists_classifiers_urls_extras_and_dependencies(dists: Dists) -> None:
    """METADATA names the distribution, Python floor, classifiers, URLs, extras and deps."""
    meta = dists.metadata()
    assert meta["Name"] == DIST_NAME
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "pip install" in (meta.get_payload() or "")  # the README is the long description
    assert (meta["License-Expression"] or meta["License"]) == "MIT"
    classifiers = set(meta.get_all("Classifier") or [])
    for version in PYTHONS:
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Typing :: Typed" in classifiers
    urls = {entry.split(",")[0].strip().lower() for entry in meta.get_all("Project-URL") or []}
    assert {"homepage", "documentation", "changelog"} <= urls
    assert set(meta.get_all("Provides-Extra") or []) >= EXTRAS
    requires = " ".join(meta.get_all("Requires-Dist") or [])
    for dependency in ("redis>=5", "croniter", "schedule"):
        assert dependency in requires
    assert "cronlock = cronlock.cli:main" in dists.wheel_text(f"{dists.dist_info}/entry_points.txt")


def test_wheel_holds_every_file_of_the_package(dists: Dists) -> None:
    """Every file under cronlock/ (modules, subpackages, Lua, py.typed, data) is in the wheel."""
    package = dists.source / "cronlock"
    expected = {
        path.relative_to(dists.source).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    names = dists.wheel_names()
    assert {"cronlock/py.typed", "cronlock/scripts/job_claim.lua"} <= expected
    assert sorted(expected - names) == []
    strays = {n for n in names if not n.startswith(("cronlock/", f"{dists.dist_info}/"))}
    assert strays == set()  # tests, docs and bench stay out of the wheel


def test_sdist_carries_tests_docs_and_project_files(dists: Dists) -> None:
    """Downstream packagers can run the tests and build the docs from the sdist alone."""
    names = dists.sdist_names()
    for required in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "mkdocs.yml"):
        assert required in names
    expected = {
        path.relative_to(dists.source).as_posix()
        for top in ("tests", "docs")
        for path in (dists.source / top).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert any(name.startswith("tests/") and name.endswith("conftest.py") for name in expected)
    assert sorted(expected - names) == []


def test_twine_check_passes(dists: Dists) -> None:
    """``twine check --strict`` accepts both files (the README renders on PyPI)."""
    if importlib.util.find_spec("twine") is None:
        pytest.skip("needs twine (pip install twine), as in the dev extra")
    result = run([sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist),
                  str(dists.wheel)], cwd=dists.source, env=venv_env(Path(sys.prefix)),
                 timeout=120)  # fmt: skip
    assert result.stdout.count("PASSED") == 2


SMOKE = """
import json, pathlib, sys
import cronlock
from cronlock import CronRunner, FakeClock, LockNotAcquired, redis_lock
from cronlock.testing import RedisServer

version, lua_names = sys.argv[1], sorted(sys.argv[2].split(","))
package = pathlib.Path(cronlock.__file__).resolve().parent
assert str(package).startswith(str(pathlib.Path(sys.prefix).resolve())), package
assert cronlock.__version__ == version, cronlock.__version__
assert sorted(p.name for p in (package / "scripts").glob("*.lua")) == lua_names
assert (package / "py.typed").is_file()

T0 = 1_800_000_000.0
server = RedisServer().start()
try:
    client = server.client()
    clock = FakeClock(T0 - 5)
    runner = CronRunner(client, prefix="smoke", clock=clock, default_ttl=5)
    runs = []

    @runner.interval(seconds=10, key="job", catch_up=3)
    def job(ctx):
        runs.append([ctx.slot_ms, ctx.attempt, ctx.fencing_token])

    other = CronRunner(client, prefix="smoke", clock=clock, default_ttl=5)
    other.interval(seconds=10, key="job", catch_up=3)(lambda: runs.append("duplicate"))
    for step in range(3):
        clock.set(T0 + step * 10 + 0.001)
        runner.run_pending()
        other.run_pending()
    assert [r[0] for r in runs] == [int((T0 + i * 10) * 1000) for i in range(3)], runs

    with redis_lock(client, "smoke", ttl=5) as first:
        try:
            with redis_lock(client, "smoke", ttl=5):
                raise AssertionError("a held lock was acquired twice")
        except LockNotAcquired:
            pass
    with redis_lock(client, "smoke", ttl=5) as second:
        assert second.fencing_token > first.fencing_token
    print(json.dumps({"runs": runs, "fences": [first.fencing_token, second.fencing_token]}))
finally:
    server.stop()
"""


def test_built_wheel_installs_in_a_fresh_venv_and_works(dists: Dists, tmp_path: Path) -> None:
    """The wheel alone (no checkout) runs jobs and locks on a private server; the CLI starts."""
    venv = make_venv(tmp_path / "venv")
    env = venv_env(venv)
    env["CRONLOCK_TEST_REDIS_SERVER"] = find_server_binary()
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "-q", str(dists.wheel)], cwd=tmp_path, env=env,
        timeout=300)  # fmt: skip
    script = tmp_path / "smoke.py"
    script.write_text(SMOKE)
    lua = ",".join(p.name for p in (dists.source / "cronlock" / "scripts").glob("*.lua"))
    result = run([python, str(script), dists.version, lua], cwd=tmp_path, env=env, timeout=120)
    assert '"runs"' in result.stdout
    assert "duplicate" not in result.stdout

    cli = str(venv / "bin" / "cronlock")
    assert "usage: cronlock" in run([cli, "--help"], cwd=tmp_path, env=env, timeout=60).stdout
    assert dists.version in run([cli, "--version"], cwd=tmp_path, env=env, timeout=60).stdout
