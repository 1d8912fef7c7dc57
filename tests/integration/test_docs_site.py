"""The documentation site builds strict: a broken link or anchor, a missing page, a nav entry to nothing or
a page left out of the nav fails the suite (mkdocs.yml's `validation` turns each into a warning and
`--strict` into a failure). mkdocs-material comes from the `test` extra, like every other tool the suite runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests import waits

ROOT = Path(__file__).resolve().parents[2]


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of the project at ``project`` into ``site`` (never the checkout's site/)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's end-of-life banner, not a finding
    return waits.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                     cwd=project, env=env, capture_output=True, text=True, limit_s=300)


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", project / "docs")
    return project


@pytest.fixture(scope="module", autouse=True)
def mkdocs_installed() -> None:
    found = subprocess.run([sys.executable, "-c", "import mkdocs, material"], capture_output=True)
    assert found.returncode == 0, "mkdocs-material is missing: pip install -e '.[test]'"


def test_the_docs_build_strict(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    assert (site / "history-dashboard.png").is_file()  # the dashboard figure the history page shows
    assert not (site / "_incoming").exists()  # other branches' pages wait there for the lead


def test_a_broken_site_fails_the_build(tmp_path: Path) -> None:
    """One build with four kinds of breakage: each is reported, and the build fails."""
    project = copy_project(tmp_path)
    cases = project / "docs/cases.md"
    cases.write_text(cases.read_text() + "\n[x](nowhere.md) [y](history.md#no-such-anchor)\n")
    (project / "docs/orphan.md").write_text("# Orphan\n")  # a page left out of the nav
    (project / "docs/replicates.md").unlink()  # a nav entry to nothing
    done = build(project, tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    for finding in ("contains a link 'nowhere.md', but the target is not found",
                    "does not contain an anchor '#no-such-anchor'",
                    'not included in the "nav" configuration:\n  - orphan.md',
                    "A reference to 'replicates.md' is included in the 'nav' configuration, which is not found"):
        assert finding in output, (finding, output)
