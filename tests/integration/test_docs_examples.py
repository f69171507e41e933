"""Every ```python block in README.md and docs/**/*.md runs against a private server.

How a block is run (the full rules are in docs/contributing.md):

* Each block runs in a fresh ``python`` subprocess with ``REDIS_URL`` set to the test
  server (its database is flushed first) and a pre-bound name ``client``, a
  ``redis.Redis`` connected to it. Tracebacks name the Markdown file and line.
* The line just before a fence may carry one marker:

  ``<!-- docs-test: skip REASON -->``
      not run; the reason is required and shows in pytest's skip summary.
  ``<!-- docs-test: requires NAME[, NAME...] -->``
      run once each NAME is a public name of ``cronlock`` (``CronRunner``) or an
      importable module (``flask``, ``cronlock.flask``); skipped, naming what is
      missing, until then (for pages written ahead of the code).
  ``<!-- docs-test: continue -->``
      runs after the block before it on the same page, in the same interpreter, so a
      page can build an example step by step. The chain is one test, named after its
      first block, and the first block's marker decides whether it runs.

Anything else that looks like a marker fails the marker test, so a typo cannot
silently turn a check off.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import pytest
import redis

from tests import procs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TIMEOUT = 60

MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
ANY_MARKER = re.compile(r"docs-test", re.IGNORECASE)
FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")

# Runs each block in the fresh interpreter: the block is compiled with the Markdown
# file as its file name and padded so that line numbers in tracebacks are the file's.
DRIVER = r"""
import json, os, sys
import redis

blocks = json.loads(sys.stdin.read())
namespace = {
    "__name__": "__main__",
    "client": redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=10),
}
for path, line, source in blocks:
    code = compile("\n" * line + source, path, "exec")
    exec(code, namespace)
"""


@dataclass
class Block:
    """One fenced ```python block."""

    path: str  # relative to the repository root, for ids and tracebacks
    line: int  # 1-based line of the opening fence
    source: str
    marker: Optional[str] = None  # the marker's text after "docs-test:", if any


@dataclass
class Chain:
    """A block and the ``continue`` blocks after it: one test."""

    blocks: List[Block] = field(default_factory=list)

    @property
    def id(self) -> str:
        first = self.blocks[0]
        extra = f"+{len(self.blocks) - 1}" if len(self.blocks) > 1 else ""
        return f"{first.path}:{first.line}{extra}"


def markdown_files() -> List[Path]:
    """README.md and every page of the docs site (vendored assets excluded)."""
    files = [ROOT / "README.md"]
    files += sorted(p for p in DOCS.rglob("*.md") if "assets" not in p.relative_to(DOCS).parts)
    return [p for p in files if p.exists()]


def parse(path: Path) -> tuple[List[Block], List[str]]:
    """The python blocks of one file, and any marker problems found on the way."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    problems: List[str] = []
    pending: Optional[tuple[int, str]] = None  # (line, marker body) awaiting its fence
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        if marker:
            if pending:
                problems.append(f"{rel}:{pending[0]}: marker not followed by a python block")
            pending = (i + 1, marker.group("body"))
            i += 1
            continue
        if ANY_MARKER.search(line) and line.strip().startswith("<!--"):
            problems.append(f"{rel}:{i + 1}: malformed docs-test marker: {line.strip()!r}")
        opened = FENCE_OPEN.match(line)
        if not opened:
            if pending and line.strip():
                problems.append(f"{rel}:{pending[0]}: marker not followed by a python block")
                pending = None
            i += 1
            continue
        fence, indent, info = opened.group("fence"), opened.group("indent"), opened.group("info")
        start = i
        body: List[str] = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(fence) and set(lines[i].strip()) == {fence[0]}
        ):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # the closing fence
        if info.lower() in ("python", "py"):
            blocks.append(
                Block(
                    rel, start + 1, textwrap.dedent("\n".join(body)) + "\n", pending and pending[1]
                )
            )
        elif pending:
            problems.append(f"{rel}:{pending[0]}: marker is on a {info or 'plain'} block")
        pending = None
    if pending:
        problems.append(f"{rel}:{pending[0]}: marker at the end of the file")
    for block in blocks:
        problems += check_marker(block)
    return blocks, problems


def check_marker(block: Block) -> List[str]:
    """Problems with a block's marker text (unknown word, skip without a reason)."""
    if block.marker is None:
        return []
    word, _, rest = block.marker.partition(" ")
    where = f"{block.path}:{block.line}"
    if word == "skip" and not rest.strip():
        return [f"{where}: 'skip' needs a reason"]
    if word == "requires" and not rest.strip():
        return [f"{where}: 'requires' needs at least one name"]
    if word == "continue" and rest.strip():
        return [f"{where}: 'continue' takes no argument"]
    if word not in ("skip", "requires", "continue"):
        return [f"{where}: unknown docs-test marker {block.marker!r}"]
    return []


def chains() -> List[Chain]:
    """All blocks of all files, grouped into chains."""
    result: List[Chain] = []
    for path in markdown_files():
        blocks, _ = parse(path)
        for block in blocks:
            if block.marker == "continue" and result and result[-1].blocks[0].path == block.path:
                result[-1].blocks.append(block)
            else:
                result.append(Chain([block]))
    return result


def skip_reason(chain: Chain) -> Optional[str]:
    """Why this chain does not run now, or None if it runs."""
    marker = chain.blocks[0].marker
    if marker is None:
        return None
    word, _, rest = marker.partition(" ")
    if word == "skip":
        return f"{chain.id}: {rest.strip()}"
    if word == "requires":
        names = [n.strip() for n in rest.split(",") if n.strip()]
        missing = [n for n in names if not available(n)]
        if missing:
            return f"{chain.id}: needs {', '.join(missing)} (not built or not installed)"
    return None


def available(name: str) -> bool:
    """A public cronlock name (``CronRunner``) or an importable module (``flask``)."""
    import cronlock

    if hasattr(cronlock, name):
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


ALL_CHAINS = chains()


def test_markers_are_well_formed() -> None:
    """Every docs-test marker is known, has its argument, and sits on a python block."""
    problems: List[str] = []
    for path in markdown_files():
        problems += parse(path)[1]
    for chain in ALL_CHAINS:
        if chain.blocks[0].marker == "continue":
            problems.append(f"{chain.id}: 'continue' on the first python block of a page")
    assert not problems, "\n".join(problems)


def test_examples_were_found() -> None:
    """The extractor sees the docs: an empty harvest would make every check vacuous."""
    assert len(ALL_CHAINS) >= 10, [c.id for c in ALL_CHAINS]


@pytest.mark.parametrize("chain", ALL_CHAINS, ids=[c.id for c in ALL_CHAINS])
def test_example_runs(chain: Chain, redis_server, tmp_path: Path) -> None:
    """The example (or step-by-step chain of examples) runs without raising."""
    reason = skip_reason(chain)
    if reason:
        pytest.skip(reason)
    redis.Redis.from_url(redis_server.url).flushdb()
    env = dict(os.environ, REDIS_URL=redis_server.url, PYTHONDONTWRITEBYTECODE="1")
    payload = [[b.path, b.line, b.source] for b in chain.blocks]
    proc = procs.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{chain.id} failed (exit {proc.returncode})\n"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
