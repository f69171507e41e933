"""The documentation site builds with ``mkdocs build --strict`` and works offline.

Needs the ``docs`` extra (MkDocs, Material, mkdocstrings). Without it the tests skip
with a loud reason; CI installs the extra, so there they always run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import List

import pytest

from tests import procs

ROOT = Path(__file__).resolve().parents[2]


def _missing() -> List[str]:
    """The docs packages that are not importable here."""
    missing: List[str] = []
    for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


pytestmark = pytest.mark.skipif(
    bool(_missing()),
    reason=(
        "DOCS NOT BUILT: mkdocs/material/mkdocstrings missing "
        f"({', '.join(_missing())}); install with: pip install -e '.[docs]'"
    ),
)

# <script src="http..."> and <link href="http..."> (stylesheets, preloads, fonts).
EXTERNAL_ASSET = re.compile(
    r"<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE
)
# A <link> to an external page (rel="canonical", rel="alternate") is not loaded by the
# browser, so only these rel values count for links.
LOADED_REL = re.compile(r"\brel\s*=\s*[\"']?(?:stylesheet|preload|modulepreload|icon)", re.I)

# Sphinx/reST markup that MkDocs prints as it is. A role comes out as ``:class:`` then
# the target, either still in backticks (inside code) or as <code>...</code>.
RAW_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj|ref):(?:`|<code>)")
# Checked on the text of a page (tags removed): an ``Example::`` line, a paragraph that
# ends in ``::`` (a literal block), a directive such as ``.. note::``.
RAW_TEXT = [
    re.compile(r"(?m)^\s*Examples?::\s*$"),
    re.compile(r"::\s*</p>"),
    re.compile(r"(?m)^\s*\.\. [a-z-]+::"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with --strict into a temporary directory."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = procs.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def test_site_builds_strict(site: Path) -> None:
    """`mkdocs build --strict` succeeds and produces the home page."""
    assert (site / "index.html").is_file()


def test_no_script_or_style_from_the_network(site: Path) -> None:
    """No built page loads a script, stylesheet or font over http(s)."""
    offenders = []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|link)\b[^>]*>", html, re.IGNORECASE):
            if not EXTERNAL_ASSET.search(tag):
                continue
            if tag.lower().startswith("<link") and not LOADED_REL.search(tag):
                continue
            offenders.append(f"{page.relative_to(site)}: {tag}")
    assert not offenders, "\n".join(offenders)


def test_mermaid_is_served_locally(site: Path) -> None:
    """Pages with diagrams load the vendored Mermaid, and the diagrams are in the page."""
    page = (site / "how-it-works" / "index.html").read_text(encoding="utf-8")
    assert 'class="mermaid"' in page
    assert re.search(r"<script src=\"[./]*assets/mermaid/mermaid\.min\.js\"", page)
    assert (site / "assets" / "mermaid" / "mermaid.min.js").stat().st_size > 1_000_000


def test_changelog_is_included(site: Path) -> None:
    """The changelog page carries CHANGELOG.md's content, not a broken include."""
    page = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Unreleased" in page
    assert "--8&lt;--" not in page


def test_api_reference_is_generated(site: Path) -> None:
    """mkdocstrings rendered the modules (a class from each appears)."""
    for module, name in [
        ("errors", "LockNotAcquired"),
        ("clock", "FakeClock"),
        ("testing", "wait_until"),
    ]:
        page = (site / "reference" / module / "index.html").read_text(encoding="utf-8")
        assert name in page, f"{name} missing from reference/{module}"


def _raw_markup(site: Path) -> List[str]:
    """Each place where a built page shows Sphinx/reST markup instead of rendering it."""
    found = []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        text = re.sub(r"<(?!/p>)[^>]+>", "", html)  # keep </p> for the "ends in ::" check
        for pattern, where in [(RAW_ROLE, html)] + [(p, text) for p in RAW_TEXT]:
            for match in pattern.finditer(where):
                line = where.count("\n", 0, match.start()) + 1
                found.append(f"{page.relative_to(site)}:{line}: {match.group(0).strip()!r}")
    return found


def test_no_raw_sphinx_markup(site: Path) -> None:
    """Docstrings are Google style with Markdown: no page shows a raw role or ``Example::``."""
    found = _raw_markup(site)
    assert not found, "raw Sphinx/reST markup in the built site:\n" + "\n".join(found)
