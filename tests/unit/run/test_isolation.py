"""The framework's Python: found without the harness venv, first on the run's PATH; bad values are one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.isolation import harness_bin, path_without_harness, python_env


def _python(folder: Path, name: str = "python3") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_a_name_is_found_without_the_harness_venv(tmp_path: Path) -> None:
    node = _python(tmp_path / "node" / "bin")
    venv = harness_bin()
    path = ":".join(p for p in (str(venv) if venv else "", str(node.parent), "/usr/bin") if p)
    env = python_env("python3", "case.yaml: launch.python", {"PATH": path})
    assert env["FRAMEWORK_PYTHON"] == str(node)
    assert env["PATH"].split(":")[0] == str(node.parent)
    if venv is not None:
        assert str(venv) not in env["PATH"].split(":") and str(venv) not in path_without_harness(path).split(":")


def test_the_node_variable_beats_the_case_file(tmp_path: Path) -> None:
    node = _python(tmp_path / "env" / "bin", "python")
    env = python_env("python3", "case.yaml: launch.python", {"PATH": "/usr/bin", "FRAMEWORK_PYTHON": str(node)})
    assert env["FRAMEWORK_PYTHON"] == str(node)


def test_no_python_asked_changes_nothing() -> None:
    assert python_env(None, "case.yaml: launch.python", {"PATH": "/usr/bin"}) == {}


def test_bad_pythons_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        python_env("no-such-python", "case.yaml: launch.python", {"PATH": str(tmp_path)})
    assert str(info.value) == ("case.yaml: launch.python: 'no-such-python' is not on PATH (the harness venv "
                               "left out); set FRAMEWORK_PYTHON to the framework environment's python")
    with pytest.raises(UsageError) as info:
        python_env(None, "case.yaml: launch.python", {"FRAMEWORK_PYTHON": str(tmp_path / "nope" / "python")})
    assert str(info.value).startswith(f"environment: FRAMEWORK_PYTHON: '{tmp_path}/nope/python' is not an "
                                      "executable file;")
    assert "\n" not in str(info.value)


def test_the_harness_python_itself_is_allowed_by_path(tmp_path: Path) -> None:
    # an explicit path is taken as given (the node may really use the harness's interpreter)
    env = python_env(sys.executable, "case.yaml: launch.python", {"PATH": "/usr/bin"})
    assert env["FRAMEWORK_PYTHON"] == str(Path(sys.executable).absolute())
