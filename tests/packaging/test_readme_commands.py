"""The README's quick start, run for real in a fresh venv made from a copy of the checkout.

The "Quick start" section holds exactly two commands: one that installs (and runs the
demo), one that runs the tests. Each is split on ``&&`` and every step runs in the venv:
``pip ...`` as written, ``cronlock demo`` shortened with ``--duration 8 --replicas 2``
when it accepts those options, and ``pytest`` as ``pytest --collect-only -q`` (running
the whole suite from inside the suite would recurse). So the README cannot drift from
what a new user can actually type.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Optional

import pytest

from tests.packaging.freshenv import CHECKOUT, copy_checkout, make_venv, run, venv_env

README = CHECKOUT / "README.md"
DEMO_OPTIONS = (("--duration", "8"), ("--replicas", "2"))


def quick_start_commands(markdown: str) -> list[str]:
    """The commands of the first ```bash block under the "Quick start" heading.

    Blank lines and ``#`` comments are dropped, a trailing ``\\`` joins lines.
    """
    heading = re.search(r"^(#+)\s*Quick start\s*$", markdown, re.MULTILINE | re.IGNORECASE)
    assert heading, "README.md has no 'Quick start' heading"
    level = len(heading.group(1))
    section = markdown[heading.end() :]
    block = re.search(r"^```(?:bash|sh|shell|console)[ \t]*\n(.*?)^```", section, re.S | re.M)
    assert block, "no ```bash block under 'Quick start'"
    before_block = section[: block.start()]
    assert not re.search(rf"^#{{1,{level}}}\s", before_block, re.M), "bash block is not under it"
    commands: list[str] = []
    pending = ""
    for raw in block.group(1).splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        commands.append((pending + line).strip())
        pending = ""
    return commands


def _split(commands: list[str]) -> tuple[str, str]:
    """(install command, test command): the test command is the one that runs pytest."""
    assert len(commands) == 2, f"the quick start should be exactly two commands: {commands}"
    tests = [c for c in commands if re.search(r"(^|&&\s*|\s)(python -m )?pytest\b", c)]
    assert len(tests) == 1, f"exactly one quick-start command should run pytest: {commands}"
    (install,) = [c for c in commands if c not in tests]
    return install, tests[0]


def _venv_made_by(words: list[str]) -> Optional[str]:
    """The directory of ``python3 -m venv DIR``, or None for any other step."""
    if len(words) == 4 and words[0] in ("python", "python3") and words[1:3] == ["-m", "venv"]:
        return words[3]
    return None


def _venv_activated_by(words: list[str]) -> Optional[Path]:
    """The venv of ``. DIR/bin/activate`` (or ``source ...``), or None for any other step."""
    if len(words) == 2 and words[0] in (".", "source") and words[1].endswith("/bin/activate"):
        return Path(words[1]).parent.parent
    return None


def test_readme_quick_start_is_two_commands_install_then_tests() -> None:
    """The Quick start block parses into exactly two commands: an install and a pytest run."""
    install, tests = _split(quick_start_commands(README.read_text(encoding="utf-8")))
    assert "pip install" in install
    assert "pytest" in tests


def test_readme_quick_start_makes_and_activates_a_venv_before_installing() -> None:
    """A system Python refuses `pip install` (externally managed): the venv comes first."""
    install, _ = _split(quick_start_commands(README.read_text(encoding="utf-8")))
    steps = [shlex.split(part.strip()) for part in install.split("&&")]
    made = [i for i, words in enumerate(steps) if _venv_made_by(words) is not None]
    activated = [i for i, words in enumerate(steps) if _venv_activated_by(words) is not None]
    pip = [i for i, words in enumerate(steps) if words[:2] == ["pip", "install"]]
    assert made, steps
    assert activated, steps
    assert pip, steps
    assert made[0] < activated[0] < pip[0], steps


def test_quick_start_parser_handles_continuations_comments_and_prompts() -> None:
    """Comments, blank lines, ``$`` prompts and backslash continuations are handled."""
    text = (
        "# x\n\n## Quick start\n\nSome words.\n\n```bash\n# install\n"
        '$ pip install -e ".[test]" \\\n    && cronlock demo\n\npytest\n```\n\n## Next\n'
        "```bash\nmore\n```\n"
    )
    assert quick_start_commands(text) == ['pip install -e ".[test]" && cronlock demo', "pytest"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_readme_commands_work_in_a_fresh_venv(tmp_path: Path) -> None:
    """Both quick-start commands succeed in a fresh venv on a copy of the checkout."""
    install, tests = _split(quick_start_commands(README.read_text(encoding="utf-8")))
    source = copy_checkout(tmp_path / "checkout")
    venv = make_venv(tmp_path / "venv")
    env = venv_env(venv)
    ran: list[str] = []
    for command in (install, tests):
        for step in (part.strip() for part in command.split("&&")):
            words = shlex.split(step)
            made = _venv_made_by(words)
            activated = _venv_activated_by(words)
            if made is not None:
                # The README makes its own venv: from here on, that one is the user's.
                venv = make_venv(source / made)
                env = venv_env(venv)
            elif activated is not None:
                assert source / activated == venv, f"activates {activated}, made {venv}"
            elif words[:1] == ["pytest"] or words[:3] == ["python", "-m", "pytest"]:
                result = run([*words, "--collect-only", "-q"], cwd=source, env=env, timeout=300)
                collected = re.search(r"(\d+) tests? collected", result.stdout)
                assert collected, result.stdout[-2000:]
                assert int(collected.group(1)) > 100
            elif words[:2] == ["cronlock", "demo"]:
                usage = run(["cronlock", "demo", "--help"], cwd=source, env=env, timeout=60)
                for option, value in DEMO_OPTIONS:
                    if option in usage.stdout and option not in words:
                        words += [option, value]
                run(words, cwd=source, env=env, timeout=240)
            else:
                run(step, cwd=source, env=env, timeout=480, shell=True)
            ran.append(" ".join(words))
    assert any(step.startswith("pytest") or "-m pytest" in step for step in ran)
    # The venv (editable: the copy) provides the package, not the checkout running this test.
    where = run(
        ["python", "-c", "import cronlock, sys; print(cronlock.__file__); print(sys.prefix)"],
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    package, prefix = where.stdout.split()[-2:]
    assert package.startswith((str(source), str(venv))), package
    assert prefix == str(venv)
