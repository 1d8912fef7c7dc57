"""The simulated xtuner node in a process table of its own, for every test that launches its cases.

The packaged xtuner cases declare ``exclusive_ray`` (autotest.inputs.case_node): the harness refuses to launch beside
any Ray cluster of this user, and CI runs other tests' real Ray clusters in parallel (``pytest -n auto``). So the
node gets a PID namespace (``unshare --pid --fork --mount-proc``) held by a reaper as its init, and every harness run
of the node goes in through ``nsenter``: the harness's probe sees only the node's processes (and a foreign cluster a
test starts in it on purpose). Where the namespace is not possible the node waits for outside clusters to end and
skips with both reasons.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotest.run.node_preconditions import ray_daemons
from tests.integration.run.xtuner_node import build_node

OUTSIDE_RAY_WAIT_S = 180.0


# the namespace's init: reaps the node's orphans (a fake daemon killed by `ray stop --force`) until it is killed
REAPER = ("import os, time\nwhile True:\n    try:\n        os.wait()\n    except ChildProcessError:\n"
          "        time.sleep(0.2)")


@functools.lru_cache(maxsize=1)
def _namespace_problem() -> str | None:
    """Why this machine cannot give the node a PID namespace of its own (probed once), or None."""
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"`{tool}` (util-linux) is not installed"
    try:
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare --pid --fork --mount-proc` failed: {exc}"
    if done.returncode:
        return f"`unshare --pid --fork --mount-proc` failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


@contextlib.contextmanager
def _own_process_table():
    """A PID namespace (with its own /proc) for the simulated node, held by a reaper as its init; yields the
    argv prefix that runs a command inside it. Killing the init ends everything left in it."""
    holder = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-c",
                               REAPER], stdin=subprocess.DEVNULL)
    init: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not (init := _children(holder.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert init, "the node's PID namespace never started"
        yield ["nsenter", f"--target={init[0]}", "--pid", "--mount"]
    finally:
        # the init's end is the namespace's: the kernel kills every process left in it (unshare ignores SIGTERM)
        for pid in init:
            os.kill(pid, signal.SIGKILL)
        if not init:
            holder.kill()  # --kill-child: its init, if it started after all, goes with it
        holder.wait(timeout=30)


@contextlib.contextmanager
def simulated_node(tmp_path: Path, models: bool = False) -> Iterator[dict]:
    """``build_node(tmp_path, models)`` with ``"enter"``: the argv prefix that runs a command in the node's own
    process table (empty where the machine cannot give it one)."""
    problem = _namespace_problem()
    if problem is None:
        with _own_process_table() as enter:
            yield {**build_node(tmp_path, models=models), "enter": enter}
        return
    deadline = time.monotonic() + OUTSIDE_RAY_WAIT_S  # a neighbouring test's cluster is short-lived
    while (outside := ray_daemons()) and time.monotonic() < deadline:
        time.sleep(1.0)
    if outside:
        pytest.skip(f"a Ray cluster outside the simulated node runs on this machine ({outside[0].name} pid "
                    f"{outside[0].pid}) and the node cannot have a process table of its own ({problem}); the "
                    "node's runs would be refused")
    yield {**build_node(tmp_path, models=models), "enter": []}
