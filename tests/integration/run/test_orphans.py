"""However the harness ends, nothing it launched outlives it (real processes, /proc checked).

SIGTERM and SIGHUP take Ctrl-C's path (cleanup, an ERROR verdict naming the signal); SIGKILL
cannot be caught, so the run's watchdog stops the session when the harness's pipe closes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotest.run.gpu_slots import SLOTS_DIR_ENV, GpuSlotTimeout, acquire, current_holders, slots_dir_for
from autotest.run.proctable import alive_as_recorded, descendants
from tests.integration.run.xtuner_node import NVIDIA_SMI
from tests import waits

REPO = Path(__file__).resolve().parents[3]
#: of the left processes' own time (tests/waits.py): the run's SIGTERM grace (10 s, which they sleep through) plus
#: their exit; a run left behind is never gone, however long the wait
GONE_WITHIN_S = 15.0


def case_file(tmp_path: Path, step_s: float = 1.0, timeout_s: int = 120, gpus: int = 0) -> Path:
    """The scripted case with its paths absolute (so a copy may live in tmp_path) and a long timeout."""
    path = tmp_path / "slow.yaml"
    path.write_text(f"""name: slow
description: The scripted run, slowed down, for kill tests.
markers: {"[gpu]" if gpus else "[]"}
goal: Be killed mid-run.
minimal_scale: One Python process.
platform: {{gpus: {gpus}, framework: null}}
inputs: {{}}
launch:
  command: ["{{python}}", tests/data/scripted_run.py, --work-dir, "{{work_dir}}", --seed, "{{seed}}", --step-s, "{step_s}"]
  fault_args: [--fault, "{{fault}}"]
  timeout_s: {timeout_s}
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 10, exact_steps: true}}
baseline: {REPO}/tests/data/baselines/scripted.yaml
seed: {{default: 0}}
consistency: {{policy: off}}
""", encoding="utf-8")
    return path


def harness(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_run(proc: subprocess.Popen, at_least: int = 1, timeout_s: float = 60.0) -> dict[int, int]:
    """Every descendant of the harness once the run is up (its watchdog too): {pid: start time}."""
    def up() -> bool:
        found = descendants(proc.pid)
        return len(found) >= at_least and any("scripted_run.py" in _cmdline(pid) for pid in found)

    # ``timeout_s`` of the harness's tree's own time; its early end fails at once
    waits.until(up, timeout_s, proc=proc, what="the run did not start")
    time.sleep(1.0)  # a step or two logged
    return descendants(proc.pid)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def assert_all_gone(tracked: dict[int, int]) -> float:
    """Wait until none of ``tracked`` runs (within GONE_WITHIN_S of their own time); the wall seconds it took."""
    t0 = time.monotonic()
    try:
        waits.until(lambda: not alive_as_recorded(tracked), GONE_WITHIN_S, pids=lambda: alive_as_recorded(tracked),
                    what=lambda: f"still running after the harness ended: "
                                 f"{ {pid: _cmdline(pid) for pid in alive_as_recorded(tracked)} }")
    finally:
        for pid in alive_as_recorded(tracked):
            os.kill(pid, signal.SIGKILL)
    return time.monotonic() - t0


def run_command(tmp_path: Path, fault: str = "hang-at:3", gpus: int = 0) -> list[str]:
    return ["-m", "autotest.cli", "run", str(case_file(tmp_path, gpus=gpus)), "--yes", "--results-dir",
            str(tmp_path / "results"), "--fault", fault]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_caught_signal_stops_the_run_and_publishes_an_error_verdict(tmp_path: Path, sig: signal.Signals) -> None:
    proc = harness(run_command(tmp_path, fault="spawn-grandchild"), tmp_path)
    tracked = wait_for_run(proc, at_least=2)  # the run and its grandchild
    proc.send_signal(sig)
    _, err = waits.communicate(proc, 60)
    assert_all_gone(tracked)
    name = "KeyboardInterrupt" if sig == signal.SIGINT else sig.name
    assert proc.returncode == 2 and f"rl-autotest: interrupted ({name})" in err
    results = json.loads(next((tmp_path / "results").glob("slow/*/results.json")).read_text())
    assert results["status"] == "ERROR"
    assert any(f"run interrupted ({name}) at step" in r["message"] for r in results["results"])


def test_sigkill_of_the_harness_stops_a_hung_run(tmp_path: Path) -> None:
    proc = harness(run_command(tmp_path), tmp_path)
    tracked = wait_for_run(proc)
    proc.kill()
    waits.communicate(proc, 30)
    assert_all_gone(tracked)  # within GONE_WITHIN_S of their own time: never the case's 120 s timeout
    log = next((tmp_path / "results").glob("slow/*/logs/watchdog.log")).read_text()
    assert "is gone: stopping session" in log and "stopped" in log


def test_sigkill_of_the_harness_releases_its_gpu_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a simulated 8-GPU node (a stand-in nvidia-smi); the case takes the whole node
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    (fakebin / "nvidia-smi").write_text(NVIDIA_SMI)
    (fakebin / "nvidia-smi").chmod(0o755)
    slots_root = tmp_path / "slots"
    monkeypatch.setenv(SLOTS_DIR_ENV, str(slots_root))
    slots = slots_dir_for(tmp_path)
    proc = harness(run_command(tmp_path, gpus=8), tmp_path,
                   env={"PATH": f"{fakebin}:{os.environ['PATH']}", SLOTS_DIR_ENV: str(slots_root)})
    tracked = wait_for_run(proc)
    assert {h.pid for h in current_holders(slots, 8)} == {proc.pid}  # the harness holds all 8
    with pytest.raises(GpuSlotTimeout):
        with acquire(1, 8, timeout_s=0.5, slots_dir=slots, poll_s=0.05):  # held while the harness lives
            pass
    proc.kill()
    waits.communicate(proc, 30)
    # the kernel dropped the flocks with the harness: free at once (120 s bounds a release that never comes)
    with acquire(8, 8, timeout_s=120.0, slots_dir=slots, poll_s=0.05) as devices:
        assert devices == list(range(8))
    assert_all_gone(tracked)


def pytest_harness(tmp_path: Path) -> subprocess.Popen:
    """pytest running one accuracy case whose run hangs at step 3."""
    suite = tmp_path / "test_suite.py"
    suite.write_text(f"""
from autotest.inputs.case import load_case

def test_slow(run_accuracy_case):
    run_accuracy_case(load_case({str(case_file(tmp_path))!r}), fault="hang-at:3")
""", encoding="utf-8")
    return harness(["-m", "pytest", "-q", str(suite), "--results-dir", str(tmp_path / "results"),
                    "-p", "no:cacheprovider"], tmp_path)


def test_sigkill_of_pytest_stops_the_run(tmp_path: Path) -> None:
    proc = pytest_harness(tmp_path)
    tracked = wait_for_run(proc)
    proc.kill()
    waits.communicate(proc, 30)
    assert_all_gone(tracked)


def test_sigterm_of_pytest_publishes_the_verdict(tmp_path: Path) -> None:
    proc = pytest_harness(tmp_path)
    tracked = wait_for_run(proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = waits.communicate(proc, 60)
    assert_all_gone(tracked)
    assert proc.returncode == 2, out  # pytest's "interrupted"
    results = json.loads(next((tmp_path / "results").glob("slow/*/results.json")).read_text())
    assert results["status"] == "ERROR"
