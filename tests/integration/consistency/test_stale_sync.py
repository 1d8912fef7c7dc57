"""A real tiny-grpo run whose weight sync after step 1 is dropped: the report names a stale sync with N = 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.consistency.analyze import analyze_dumps

pytestmark = pytest.mark.slow  # a real tiny-grpo run with MSProbe dumps (~20 s on 2 loaded cores)

STALE_BY_ONE = "the rollout served weights 1 version(s) behind the actor (a stale sync)"


def test_a_dropped_sync_is_named_one_version_stale(tmp_path: Path) -> None:
    diag = tmp_path / "diag"
    config = tmp_path / "diag.json"
    config.write_text(json.dumps({"output_dir": str(diag), "window_step": 2, "prompts_per_step": 1,
                                  "samples_per_prompt": 2, "micro_batch_size": 1, "task": "statistics",
                                  "msprobe_log_level": "error", "max_forwards_per_side": 2}))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", str(tmp_path / "w"),
                           "--diagnostic-config", str(config), "--fault", "sync-skip-alternate", "--steps", "2"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = {side: [json.loads(x) for x in (diag / side / "correlation.jsonl").read_text().splitlines()]
             for side in ("rollout", "actor")}
    # the batch label agrees on both sides; only each side's own held version shows the dropped sync
    assert {line["weight_version"] for side in lines for line in lines[side]} == {1}
    assert [line["held_weight_version"] for line in lines["rollout"]] == [0, 0]
    assert [line["held_weight_version"] for line in lines["actor"]] == [1, 1]
    report = analyze_dumps(diag / "actor" / "dump", diag / "rollout" / "dump", tmp_path / "out",
                           train_correlation=diag / "actor" / "correlation.jsonl",
                           rollout_correlation=diag / "rollout" / "correlation.jsonl")
    assert report.verdict == "root_cause_found" and report.root_cause["bucket"] == "parameter_sync_mismatch"
    assert STALE_BY_ONE in report.hypothesis["inference_path"]
    assert any(line.startswith(f"weights: {STALE_BY_ONE}: step 2") for line in report.evidence_chain)
    assert STALE_BY_ONE in (tmp_path / "out" / "output_5_root_cause_report.md").read_text()
