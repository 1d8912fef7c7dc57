"""The first Ctrl-C stops every calibration run at once (real `rl-autotest calibrate tiny-grpo --runs 2`)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.integration.workloads.test_harness_killed import Harness
from tests import waits

STOPPED_WITHIN_S = 60.0  # two runs' SIGTERM grace (10 s each, in parallel) and the verdicts; a run takes minutes


@pytest.mark.slow
def test_one_ctrl_c_stops_every_run_and_promotes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    run = Harness(["-m", "autotest.cli", "calibrate", "tiny-grpo", "--runs", "2", "--jobs", "2", "--allow-dirty",
                   "--promote", "--results-dir", str(tmp_path / "results"),
                   "--baselines-dir", str(baselines)], tmp_path, cache=tmp_path / "cache")
    run.wait_until_running("tiny-grpo", runs=2)
    run.proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    # stopped, not finished: both verdicts below say "run interrupted" (a run takes minutes); the limit counts the
    # harness's own time, so a busy machine's slower stop (two 10 s SIGTERM graces, the verdicts) never decides it
    output, _ = waits.communicate(run.proc, STOPPED_WITHIN_S)
    took_s = time.monotonic() - t0
    run.assert_nothing_left(set())
    assert run.proc.returncode == 2 and "rl-autotest: interrupted (KeyboardInterrupt)" in output, output[-2000:]
    assert "interrupted (KeyboardInterrupt): stopping every calibration run" in output
    verdicts = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("results.json")]
    assert len(verdicts) == 2 and all(v["status"] == "ERROR" for v in verdicts), [v["status"] for v in verdicts]
    for verdict in verdicts:
        assert any("run interrupted (KeyboardInterrupt)" in r["message"] for r in verdict["results"])
    assert list(baselines.iterdir()) == []  # no candidate, nothing promoted
    print(f"calibrate stopped {took_s:.1f} s after one SIGINT")
