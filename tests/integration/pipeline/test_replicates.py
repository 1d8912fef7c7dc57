"""Replicates end to end on tiny-grpo: K real runs side by side, each in its own folder, one verdict on their mean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import REPO_ROOT, load_case
from autotest.readers.reading import read_trace
from autotest.judge.power import calibration_runs
from autotest.judge.replicate_mean import pooled_threshold_scale
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
from tests import waits

pytestmark = pytest.mark.slow

REWARDS = "response/rewards/mean"


def _options(tmp_path: Path, judge: JudgeOptions = JudgeOptions(), publish: PublishOptions = PublishOptions()
             ) -> RunOptions:
    return RunOptions(LaunchOptions(results_root=tmp_path / "results", poll_interval_s=0.2), judge, publish)


def test_two_replicates_are_judged_on_their_mean_with_scaled_pooled_thresholds(tmp_path: Path) -> None:
    case = load_case("tiny-grpo")
    run = run_case(case, _options(tmp_path, JudgeOptions(replicates=2)))
    # two replicates fill both cores: on a loaded machine step time (the machine's noise) may breach, nothing else
    failing = [r.check_id for r in run.verdict.failing() if r.is_gate]
    assert failing in ([], ["time/step[percentile]"]), [r.message for r in run.verdict.failing()]
    assert run.summary_line().startswith(f"tiny-grpo: {run.status} (mean of 2 replicates)")
    folder = run.results_dir
    replicates = [folder / "replicates" / "r1-seed10", folder / "replicates" / "r2-seed11"]
    for sub in replicates:  # each replicate is a normal run: its logs, tracker, work dir and own verdict
        for name in ("tracker.jsonl", "logs/stdout.log", "work", "results.json", "report.md"):
            assert (sub / name).exists(), sub / name
    data = json.loads((folder / "results.json").read_text())
    own = [json.loads((sub / "results.json").read_text())["status"] for sub in replicates]
    assert [(r["seed"], r["folder"], r["status"]) for r in data["replicates"]] == [
        (10, "replicates/r1-seed10", own[0]), (11, "replicates/r2-seed11", own[1])]  # relative: the folder can move
    baseline = load_baseline(case.baseline_path)
    scale = pooled_threshold_scale(2, calibration_runs(baseline))
    assert data["pooled_threshold_scale"] == pytest.approx(scale)
    calibrated = {c.check_id: c.threshold for c in baseline.checks}
    pooled = [r for r in data["results"] if r.get("scope") == "pooled"]
    assert pooled and all(r["threshold"] == pytest.approx(calibrated[r["check_id"]] * scale) for r in pooled)
    # the judged series is the per-step mean of the two trackers
    traces = [read_trace(sub / "tracker.jsonl", "xtuner") for sub in replicates]
    early = next(r for r in pooled if r["check_id"] == f"{REWARDS}[pooled 1-15]")["points"]
    expected = [(traces[0].series[REWARDS][s] + traces[1].series[REWARDS][s]) / 2 for s in early["steps"]]
    assert early["steps"] == list(range(1, 16)) and early["current"] == pytest.approx(expected)
    report = (folder / "report.md").read_text()
    assert report.splitlines()[0].endswith(" (mean of 2 replicates)")
    for label, seed in (("r1-seed10", 10), ("r2-seed11", 11)):
        assert f"| {label} | {seed} | 0 |" in report and f"[replicates/{label}](replicates/{label})" in report
    assert "| check | mean | r1-seed10 | r2-seed11 |" in report  # each replicate's own value of every check
    assert (folder / "plots" / "response_rewards_mean.png").is_file()


def test_a_crashing_replicate_makes_the_verdict_an_error_naming_it(tmp_path: Path) -> None:
    """Replicate 2 (seed 11) gets the catalogue's crash fault; replicate 1 (seed 10) runs clean."""
    source = (REPO_ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text()
    command = ('  command: if [ {seed} = 11 ]; then crash="--fault crash-at:3"; fi; '
               "exec {python} -m autotest.workloads.grpo --work-dir {work_dir} --seed {seed} $crash\n")
    source = source.replace("baseline: baselines/", f"baseline: {REPO_ROOT}/baselines/")
    lines = [command if line.startswith("  command:") else line for line in source.splitlines(keepends=True)]
    path = tmp_path / "tiny-grpo.yaml"
    path.write_text("".join(lines) + "replicates: 2\n")
    case = load_case(path)
    assert case.replicates == 2
    run = run_case(case, _options(tmp_path, publish=PublishOptions(with_plots=False)))
    data = json.loads((run.results_dir / "results.json").read_text())
    assert [(r["seed"], r["exit"], r["averaged"]) for r in data["replicates"]] == [(10, "0", True), (11, "1", False)]
    # ERROR, or FAIL as for a single run when one of its own gates failed before the crash (step time on a
    # loaded machine can, over two steps)
    own = data["replicates"][1]["status"]
    assert run.status == ("FAIL" if own == "FAIL" else "ERROR")
    failing = [r for r in run.verdict.failing() if r.is_gate]
    assert [r.check_id for r in failing] == ["replicate[r2-seed11]"], [r.message for r in failing]
    assert "replicate r2-seed11: run exited with code 1 at step 2 of 45" in failing[0].message
    assert run.summary_line().startswith(f"tiny-grpo: {run.status} (mean of 2 replicates)")
    assert data["pooled_threshold_scale"] == pytest.approx(1.0)  # the clean replicate alone is judged
    assert "replicate[r2-seed11]" in (run.results_dir / "report.md").read_text()


SLOW_CASE = """name: slow
description: The scripted run, slowed down, in two replicates.
markers: []
goal: Be interrupted mid-run.
minimal_scale: One Python process per replicate.
platform: {gpus: 0, framework: null}
inputs: {}
launch:
  command: ["{python}", tests/data/scripted_run.py, --work-dir, "{work_dir}", --seed, "{seed}", --step-s, "1.0"]
  timeout_s: 120  # bounds a broken run: this one (10 steps of 1 s) is interrupted after its first step
tracker: {format: xtuner, work_dir_env: WORK_DIR}
expected: {steps: 10, exact_steps: true}
baseline: REPO_ROOT/tests/data/baselines/scripted.yaml
seed: {default: 0}
replicates: 2
"""


def _scripted_runs(tmp_path: Path) -> list[int]:
    """Pids of the scripted runs alive now whose command line names ``tmp_path`` (this test's runs only)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "scripted_run.py" in line and str(tmp_path) in line:
            found.append(int(proc.name))
    return found


def test_an_interrupt_stops_every_replicate_and_each_ending_leaves_a_verdict(tmp_path: Path) -> None:
    (tmp_path / "slow.yaml").write_text(SLOW_CASE.replace("REPO_ROOT", str(REPO_ROOT)), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "autotest.cli", "run", str(tmp_path / "slow.yaml"), "--yes",
                             "--no-history", "--results-dir", str(tmp_path / "results")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waits.until(lambda: len(_scripted_runs(tmp_path)) >= 2, 60, proc=proc)  # both replicates side by side
    def stepped(tracker: Path) -> bool:
        return any(json.loads(line).get("step", 0) >= 1 for line in tracker.read_text().splitlines()
                   if line.endswith("}"))

    # step 1 logged by each (on a busy machine later than a second in)
    waits.until(lambda: sum(map(stepped, (tmp_path / "results").rglob("tracker.jsonl"))) >= 2, 60, proc=proc)
    proc.send_signal(signal.SIGTERM)
    _, err = waits.communicate(proc, 60)
    assert proc.returncode == 2 and "rl-autotest: interrupted (SIGTERM)" in err
    assert not _scripted_runs(tmp_path)
    (folder,) = (tmp_path / "results" / "slow").iterdir()
    top = json.loads((folder / "results.json").read_text())
    assert top["status"] == "ERROR"
    assert [r["check_id"] for r in top["results"] if r["status"] == "ERROR"] == ["replicates[interrupted]"]
    for sub in ("r1-seed0", "r2-seed1"):
        own = json.loads((folder / "replicates" / sub / "results.json").read_text())
        assert own["status"] == "ERROR"
        assert any("run interrupted (SIGTERM) at step" in r["message"] for r in own["results"]), sub
    assert "# slow: ⚠️ ERROR" in (folder / "report.md").read_text()


def test_adaptive_replicates_stop_after_one_run_far_from_every_threshold(tmp_path: Path) -> None:
    """The scripted run lands on its golden: the first look decides, no more seeds run."""
    case = load_case(REPO_ROOT / "tests" / "data" / "cases" / "scripted.yaml")
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path), JudgeOptions(adaptive_max=3),
                                    PublishOptions(with_plots=False)))
    assert run.status == "PASS" and run.replicates == 1
    assert run.verdict is not None and run.verdict.context["adaptive"] == {"runs": 1, "of": 3, "look": 1}
    assert [p.name for p in (run.results_dir / "replicates").iterdir()] == ["r1-seed0"]


OFFSET_CASE = """name: offset
description: The scripted run in two replicates, the rewards of some seeds shifted.
markers: []
goal: Fail fast on the mean of the replicates, not on one of them.
minimal_scale: One Python process per replicate.
platform: {gpus: 0, framework: null}
inputs: {}
launch:
  command: if echo "SEEDS" | grep -qw {seed}; then offset="--fault reward-offset:0.015"; fi; exec {python}
    tests/data/scripted_run.py --work-dir {work_dir} --seed {seed} --step-s 0.3 $offset
  timeout_s: 120  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {format: xtuner, work_dir_env: WORK_DIR}
expected: {steps: 10, exact_steps: true}
baseline: REPO_ROOT/tests/data/baselines/scripted.yaml
seed: {default: 0}
replicates: 2
"""


@pytest.mark.parametrize("shifted", ["1", "0 1"])
def test_fail_fast_decides_on_the_mean_of_the_replicates(tmp_path: Path, shifted: str) -> None:
    """The rewards gate is 0.01 per step. One replicate 0.015 off is past it alone, but the mean the verdict
    judges is 0.0075 off: both run to the end. Both off: the mean is past it at step 1 and both stop."""
    path = tmp_path / "offset.yaml"
    path.write_text(OFFSET_CASE.replace("SEEDS", shifted).replace("REPO_ROOT", str(REPO_ROOT)))
    lines: list[str] = []
    run = run_case(load_case(path), _options(tmp_path, JudgeOptions(fail_fast=True),
                                             PublishOptions(with_plots=False, progress=lines.append)))
    data = json.loads((run.results_dir / "results.json").read_text())
    stopped = [line for line in lines if "FAIL decided" in line]
    last_steps = [read_trace(run.results_dir / r["folder"] / "tracker.jsonl").last_train_step
                  for r in data["replicates"]]
    if shifted == "1":
        assert run.status == "PASS" and stopped == [] and last_steps == [10, 10], "\n".join(lines)
        return
    assert run.status == "FAIL", "\n".join(lines)
    assert len(stopped) == 2 and all("the mean of 2 replicates: response/rewards/mean at step" in s for s in stopped)
    assert max(last_steps) < 10 and not any(r["averaged"] for r in data["replicates"]), last_steps
    failing = [r["message"] for r in data["results"] if r["status"] == "FAIL"]
    assert any("run stopped by fail-fast at step" in m and "the mean of 2 replicates" in m for m in failing), failing
