"""Kill the harness in the middle of a real embedded run: nothing of the run, and no port it opened, survives.

The harness is ``rl-autotest run <case>`` or ``pytest -m <marker>`` over the accuracy suite, running
tiny-grpo (one training process) or tiny-mopd (a launcher, two teacher HTTP servers and a training
process). Every process the harness starts inherits a marker variable, so ``/proc/*/environ`` finds the
run's processes (the watchdog included) whatever session they moved to. The signals are covered
pairwise (each signal with each workload and each harness) rather than all twelve combinations: a kill
comes a few seconds into the run, once its processes (and teacher ports) are up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from autotest.inputs.case import load_case
from tests.helpers import ROOT
from tests import waits

# the runs import torch, this process does not (importing it here would cost every worker seconds at collection)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

MARKER_ENV = "RL_AUTOTEST_KILL_TEST"
# both of the own time of the processes awaited (tests/waits.py: wall time less their waits for a CPU), so load
# never decides them; a run that never comes up, or is left behind, still runs out of them
UP_WITHIN_S = 240.0  # harness start, the fault check, torch imports and (tiny-mopd) two servers
GONE_WITHIN_S = 20.0  # tiny-mopd's SIGTERM grace is 15 s (slept through); the launcher stops its servers within 5 s
WORKLOAD_MODULE = {"tiny-grpo": "autotest.workloads.grpo", "tiny-mopd": "autotest.workloads.mopd"}


def marked_processes(marker: str) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment carries ``marker``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(MARKER_ENV) == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def listening_ports(procs: list[psutil.Process]) -> set[int]:
    ports = set()
    for proc in procs:
        try:
            ports |= {c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return ports


def still_listening(ports: set[int]) -> set[int]:
    """Of ``ports``, those with a listening TCP socket on this machine (any owner: /proc/net/tcp)."""
    return {c.laddr.port for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port in ports}


def describe(procs: list[psutil.Process]) -> list[str]:
    lines = []
    for proc in procs:
        try:
            lines.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            continue
    return lines


class Harness:
    """One harness process with a marker in its environment, and the run it started."""

    def __init__(self, args: list[str], tmp_path: Path, cache: Path) -> None:
        self.marker = uuid.uuid4().hex
        env = {**os.environ, MARKER_ENV: self.marker, "RL_AUTOTEST_CACHE": str(cache),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        env.pop("GITHUB_STEP_SUMMARY", None)
        self.proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.results = tmp_path / "results"

    def wait_until_running(self, case: str, runs: int = 1) -> set[int]:
        """Block until ``runs`` training processes run (and tiny-mopd's servers listen); their ports."""
        module = WORKLOAD_MODULE[case]

        def up() -> bool:
            procs = marked_processes(self.marker)
            training = [p for p in procs if module in _cmdline(p) and "--work-dir" in _cmdline(p)]
            ports = listening_ports(procs)
            if self.proc.poll() is not None:
                pytest.fail(f"the harness ended before the run was up: {self.proc.communicate()[0][-3000:]}")
            return len(training) >= runs and (case != "tiny-mopd" or len(ports) >= 2 * runs)

        try:
            waits.until(up, UP_WITHIN_S, pid=self.proc.pid, what=f"the run of {case} was not up")
        except AssertionError:
            self.kill_everything()
            raise
        time.sleep(2.0)  # a few seconds into the run
        return listening_ports(marked_processes(self.marker))

    def assert_nothing_left(self, ports: set[int]) -> float:
        """Within GONE_WITHIN_S: no marked process and none of ``ports`` listening; seconds it took."""
        t0 = time.monotonic()
        try:
            waits.until(lambda: not marked_processes(self.marker) and not still_listening(ports), GONE_WITHIN_S,
                        pids=lambda: [p.pid for p in marked_processes(self.marker)],
                        what=lambda: f"after the harness ended: still running {describe(marked_processes(self.marker))}"
                                     f", still listening {sorted(still_listening(ports))}")
        except AssertionError:
            self.kill_everything()
            raise
        return time.monotonic() - t0

    def kill_everything(self) -> None:
        for proc in [self.proc, *marked_processes(self.marker)]:
            try:
                proc.kill()
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
        waits.communicate(self.proc, 30)

    def results_json(self) -> dict:
        (path,) = self.results.glob("*/*/results.json")
        return json.loads(path.read_text(encoding="utf-8"))


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def cli_run(case: str, tmp_path: Path, fault: str | None = None) -> list[str]:
    args = ["-m", "autotest.cli", "run", case, "--yes", "--no-history", "--results-dir", str(tmp_path / "results")]
    return args + (["--fault", fault] if fault else [])


def pytest_run(case: str, tmp_path: Path) -> list[str]:
    marker = case.removeprefix("tiny-")
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, "-k", case, "--no-history",
            "--results-dir", str(tmp_path / "results"), "autotest/suites/test_accuracy.py"]


HARNESSES = {"run": cli_run, "pytest": pytest_run}

# (signal, case, harness): every signal with each case and each harness; hang-at:2 where the CLI can ask for it
KILLS = [
    (signal.SIGINT, "tiny-grpo", "run"), (signal.SIGINT, "tiny-mopd", "pytest"),
    (signal.SIGTERM, "tiny-mopd", "run"), (signal.SIGTERM, "tiny-grpo", "pytest"),
    (signal.SIGKILL, "tiny-grpo", "run"), (signal.SIGKILL, "tiny-mopd", "pytest"),
    (signal.SIGKILL, "tiny-mopd", "run"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "case", "harness"), KILLS, ids=[f"{s.name}-{c}-{h}" for s, c, h in KILLS])
def test_killing_the_harness_leaves_no_process_and_no_port(sig: signal.Signals, case: str, harness: str,
                                                          tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # tiny-mopd's teachers are trained once per session into a test cache (never ~/.cache)
    cache = request.getfixturevalue("mopd_fixture").root.parents[1] if case == "tiny-mopd" else tmp_path / "cache"
    args = cli_run(case, tmp_path, fault="hang-at:2") if harness == "run" else pytest_run(case, tmp_path)
    run = Harness(args, tmp_path, cache=cache)
    ports = run.wait_until_running(case)
    if case == "tiny-mopd":
        assert len(ports) >= 2, ports  # the two teacher servers
    run.proc.send_signal(sig)
    output, _ = waits.communicate(run.proc, 60)
    took_s = run.assert_nothing_left(ports)
    print(f"{sig.name} {case} {harness}: nothing left {took_s:.1f} s after the harness ended; ports {sorted(ports)}")
    # a case with replicates (tiny-mopd) runs each seed in its own folder, with its own session and watchdog
    replicates = load_case(case).replicates
    logs_pattern = "*/*/replicates/*/logs" if replicates > 1 else "*/*/logs"
    if sig == signal.SIGKILL:  # nothing could be written: the watchdog said why it stopped the run
        logs = list(run.results.glob(f"{logs_pattern}/watchdog.log"))
        assert len(logs) == replicates, logs
        for log in logs:
            assert "is gone: stopping session" in log.read_text(), log.read_text()
        return
    name = "KeyboardInterrupt" if sig == signal.SIGINT else sig.name
    assert run.proc.returncode == 2, output[-3000:]  # rl-autotest: error/interrupt; pytest: interrupted
    results = run.results_json()
    assert results["status"] == "ERROR"
    messages = [r["message"] for r in results["results"]]
    assert any(f"run interrupted ({name})" in m for m in messages), messages
    every_logs = list(run.results.glob(logs_pattern))
    assert len(every_logs) == replicates, every_logs
    for logs in every_logs:
        assert (logs / "stdout.log").is_file() and (logs / "launch.json").is_file()
        assert (logs.parent / "report.md").is_file()
