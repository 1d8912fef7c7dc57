"""Project mode: a framework's repository names its own cases, baselines and results.

The harness is an installed tool; like pytest, ruff or mypy it reads a table from the user's
repository — ``[tool.rl-autotest]`` in ``pyproject.toml``, or the same keys at the top of
``rl-autotest.toml`` — found from the working directory upwards (``$RL_AUTOTEST_PROJECT`` names the
file or its folder explicitly). Every path in the table is the user's and resolves against the
table's folder. Without a table the harness runs its packaged demo cases.

```toml
[tool.rl-autotest]
cases = ["accuracy/cases"]          # folders of case YAML files (inside the project)
baselines = "accuracy/baselines"    # golden baselines (inside the project)
results = "accuracy/results"        # results root (anywhere; $RL_AUTOTEST_RESULTS still wins)
history = "sqlite:///accuracy/results/history.sqlite"   # optional run-history URL
framework = "."                     # optional: the framework checkout under test (default: its git repo)
```
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.schema import Section

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PROJECT_ENV = "RL_AUTOTEST_PROJECT"
TABLE = "tool.rl-autotest"
DOC = "the project table's keys (docs/project.md)"
_REQUIRED = ("cases", "baselines", "results")
_OPTIONAL = ("history", "framework")


@dataclass(frozen=True)
class Project:
    """The user's repository as the harness sees it; every path is absolute."""

    #: the folder holding the table
    root: Path
    #: the file the table is in (pyproject.toml or rl-autotest.toml)
    source: Path
    cases: tuple[Path, ...]
    baselines: Path
    results: Path
    #: the run-history URL (None: ``<results>/history.sqlite``)
    history: str | None
    #: the framework checkout under test (None: the project is not in a git repository)
    framework: Path | None

    def contains(self, path: Path) -> bool:
        return Path(path).resolve().is_relative_to(self.root)


def find_project(start: Path | None = None) -> Project | None:
    """The project whose table is nearest above ``start`` (default: the working directory), else None."""
    named = os.environ.get(PROJECT_ENV)
    if named is not None:
        return _named_project(named)
    return _search(Path(start or Path.cwd()).resolve())


def _search(start: Path) -> Project | None:
    for folder in (start, *start.parents):
        found = _tables_in(folder)
        if len(found) > 1:
            raise UsageError(f"{found[0][0]} and {found[1][0]}: two project tables in one folder; "
                             "keep one (rl-autotest.toml or [tool.rl-autotest] in pyproject.toml)")
        if found:
            path, table, where = found[0]
            return _parse(path, table, where)
    return None


def _named_project(named: str) -> Project:
    if not named.strip():
        raise UsageError(f"${PROJECT_ENV} is set but empty; unset it or name the project's pyproject.toml "
                         "or rl-autotest.toml")
    path = Path(named).expanduser().resolve()
    folder = path if path.is_dir() else path.parent
    if not path.exists():
        raise UsageError(f"${PROJECT_ENV}: {path} does not exist; name the project's pyproject.toml, "
                         "rl-autotest.toml or their folder")
    found = [f for f in _tables_in(folder) if path.is_dir() or f[0] == path]
    if not found:
        raise UsageError(f"${PROJECT_ENV}: {path} has no [tool.rl-autotest] table; add one (see {DOC})")
    if len(found) > 1:
        raise UsageError(f"{found[0][0]} and {found[1][0]}: two project tables in one folder; keep one")
    return _parse(*found[0])


def _tables_in(folder: Path) -> list[tuple[Path, dict[str, Any], str]]:
    """(file, table, dotted prefix) for each project table in ``folder``."""
    found = []
    own = folder / "rl-autotest.toml"
    if own.is_file():
        table = _read_toml(own)
        tool = table.get("tool")
        if isinstance(tool, dict) and ("rl-autotest" in tool or "rl_autotest" in tool):
            raise UsageError(f"{own}: [tool.rl-autotest]: in rl-autotest.toml the keys go at the top level "
                             "(cases = [...], baselines = ..., results = ...), without the table header a "
                             "pyproject.toml needs; remove the [tool.rl-autotest] line")
        found.append((own, table, ""))
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool")
        if isinstance(tool, dict) and "rl-autotest" in tool:
            found.append((pyproject, tool["rl-autotest"], TABLE))
        elif isinstance(tool, dict) and "rl_autotest" in tool:
            raise UsageError(f"{pyproject}: tool.rl_autotest: the table is named [tool.rl-autotest]; rename it")
    return found


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _parse(path: Path, table: Any, where: str) -> Project:
    top = Section(table, path, where, doc=DOC, required=_REQUIRED, optional=_OPTIONAL)
    root = path.parent.resolve()
    raw_cases = top.get("cases")
    if isinstance(raw_cases, str):
        top.fail("cases", f"{raw_cases!r} is a text, not a list of folders", f'write cases = ["{raw_cases}"]')
    cases = tuple(_inside(top, f"cases[{i}]", root, folder, must_exist=True)
                  for i, folder in enumerate(top.str_list("cases")))
    if not cases:
        top.fail("cases", "the list is empty", 'name at least one folder of case files, e.g. ["accuracy/cases"]')
    baselines = _inside(top, "baselines", root, top.text("baselines"), must_exist=False)
    results = (root / Path(top.text("results")).expanduser()).resolve()
    history = top.text("history", default=None)
    if history is not None and history.startswith("sqlite:///") and not history.startswith("sqlite:////"):
        history = f"sqlite:///{(root / history[len('sqlite:///'):]).resolve()}"  # relative: to the table's folder
    framework_raw = top.text("framework", default=None)
    if framework_raw is None:
        framework = _git_top(root)
    else:
        framework = (root / Path(framework_raw).expanduser()).resolve()
        if not framework.is_dir():
            top.fail("framework", f"{framework} is not a folder", "name the framework checkout under test")
    return Project(root=root, source=path.resolve(), cases=cases, baselines=baselines, results=results,
                   history=history, framework=framework)


def _inside(top: Section, key: str, root: Path, raw: str, *, must_exist: bool) -> Path:
    """``raw`` resolved against ``root``; cases and baselines belong to the project."""
    folder = (root / Path(raw).expanduser()).resolve()
    if not folder.is_relative_to(root):
        top.fail(key, f"{raw!r} is outside the project ({root})", "keep cases and baselines in the repository")
    if must_exist and not folder.is_dir():
        top.fail(key, f"{folder} is not a folder", "create it or fix the path")
    if folder.exists() and not folder.is_dir():
        top.fail(key, f"{folder} is a file, not a folder", "name a folder")
    return folder


def _git_top(folder: Path) -> Path | None:
    """The git work tree ``folder`` is in, else None."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None
