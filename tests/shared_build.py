"""Build an expensive test artefact once per test session, xdist workers included.

``pytest -n 2`` gives each worker its own session, so a ``scope="session"`` fixture that makes real
MSProbe dumps or a trained run would be made once per worker. ``shared_build`` makes it once for the
whole session: in a folder under the session's common temp root (the parent of the workers'
``popen-gwN`` folders), named by a key of what decides the artefact's content, built in place under
a file lock and marked done last, so a worker either builds it or waits and reads the finished one
(in place, because dumps and logs record their own absolute paths). Nothing is kept across sessions: every session builds from the code it tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp folder every worker of this session shares (the basetemp itself without xdist)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "shared-builds"


def content_key(*parts: Any, files: tuple[Path, ...] = ()) -> str:
    """A short hash of the build's parameters and the text of the files that decide its output."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode())
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, key: str,
                 build: Callable[[Path], None]) -> Path:
    """The folder ``build`` filled, made by the first worker that asks; the others wait on the lock.

    ``build`` receives an empty folder at the artefact's final path (paths it writes into its
    outputs stay valid) and must fill it; a build that raises leaves nothing behind, so the next
    worker builds again and fails the same way, in its own test.
    """
    from filelock import FileLock

    root = session_root(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{name}-{key}"
    done = target / ".built"
    with FileLock(str(target) + ".lock"):
        if done.is_file():
            return target
        if target.exists():  # a build that failed part-way
            shutil.rmtree(target)
        target.mkdir()
        try:
            build(target)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        done.write_text("ok\n", encoding="utf-8")
    return target
