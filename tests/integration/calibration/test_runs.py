from __future__ import annotations

import os
import subprocess
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from autotest.calibration.runs import (
    CalibrationOptions,
    baseline_files,
    calibrate_case,
    calibration_run,
    calibration_seeds,
    load_spec,
    promote,
)
from autotest.calibration.thresholds import CalibrationError
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import case_argument, load_case
from autotest.judge.model import FAIL, PASS
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from autotest.run.artifacts import artifacts_for
from autotest.run.launch import launch_spec
from autotest.run.process_group import launch

# A small real workload in a git checkout of its own (the "framework"): 10 steps, eval at 0/5/10 on
# a 20-item eval set, seeded noise; --fault unsynced raises the k3 mismatch as a stale layer would;
# FAKE_CRASH_SEED / FAKE_OUTLIER_SEED make that seed's run crash / log shifted rewards.
TRAIN = '''
import argparse, datetime, json, os, random, sys
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--fault", default="")
a = p.parse_args()
if os.environ.get("FAKE_CRASH_SEED") == str(a.seed):
    sys.exit("crash on purpose")
rng = random.Random(a.seed)
exp = Path(os.environ["WORK_DIR"]) / datetime.datetime.now().strftime("%Y%m%d%H%M%S")
(exp / "logs" / "exp_tracking").mkdir(parents=True)
(exp / "config.json").write_text(json.dumps({"seed": a.seed, "eval_set_size": 20}))
rows = [{"eval/accuracy": rng.randint(0, 2) / 20, "step": 0}]
for step in range(1, 11):
    outlier = 0.3 if os.environ.get("FAKE_OUTLIER_SEED") == str(a.seed) else 0.0
    row = {"response/rewards/mean": 0.1 + 0.05 * step + rng.gauss(0, 0.01) + outlier,
           "mismatch/mismatch_k3_kl": (1e-2 * step if a.fault == "unsynced" else 1e-14 * (1 + rng.random())),
           "time/step": 1.0 + rng.random() * 0.1, "step": step}
    if step % 5 == 0:
        row["eval/accuracy"] = (8 + step + rng.randint(0, 2)) / 20
    rows.append(row)
(exp / "logs" / "exp_tracking" / "tracker.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
'''

CASE = """name: {name}
description: fake framework run for the calibration tests
markers: [grpo]
goal: exercise calibration end to end with a real (small) process
minimal_scale: ten steps, no model
platform:
  gpus: 0
  framework: {{name: fakefw, env: FAKE_FW_ROOT}}
launch:
  command: ["{{python}}", "${{FAKE_FW_ROOT}}/train.py", --seed, "{{seed}}"]
  fault_args: [--fault, "{{fault}}"]
  timeout_s: 60  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: xtuner}}
expected: {{steps: 10}}
baseline: baselines/{name}.yaml
seed: {{default: 4, calibration: [0, 1, 2, 3]}}
"""

SPEC = """schema_version: 1
name: {name}
golden: {{table: {{}}}}
steps: {{expected: 10, exact: true}}
calibration:
  margin: 1.5
  relative_floor: 0.1
  floors: {{mismatch/mismatch_k3_kl: 1.0e-4}}
checks:
  - {{metric: response/rewards/mean, method: absolute, operator: "<", threshold: 0.1, scope: percentile,
     percentile: 80}}
  - {{metric: mismatch/mismatch_k3_kl, method: absolute, operator: "<=", threshold: 0.0001}}
  - {{metric: eval/accuracy, method: absolute, operator: "<", threshold: 0.05, scope: points, points: [0, 5, 10]}}
  - {{metric: time/step, method: relative, operator: "<", threshold: 0.5, severity: reference}}
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def fake_framework(tmp_path: Path, monkeypatch, name: str, train: str, case: str, spec: str):
    """(case, baselines dir, framework checkout): a clean git checkout with ``train`` as its training script,
    the case and its baseline spec (``case`` and ``spec`` are templates of ``{name}``)."""
    repo = tmp_path / "fw"
    repo.mkdir()
    (repo / "train.py").write_text(textwrap.dedent(train))
    _git(repo, "init", "-q")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-q", "-m", "fake framework")
    monkeypatch.setenv("FAKE_FW_ROOT", str(repo))
    case_file = tmp_path / "cases" / f"{name}.yaml"
    case_file.parent.mkdir()
    case_file.write_text(case.format(name=name))
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / f"{name}.yaml").write_text(spec.format(name=name))
    return load_case(case_file), baselines, repo


@pytest.fixture
def fake_case(tmp_path, monkeypatch):
    """(case, baselines dir, framework checkout): a clean git checkout with the training script."""
    return fake_framework(tmp_path, monkeypatch, "fake-calib", TRAIN, CASE, SPEC)


def options(tmp_path: Path, baselines: Path, **kw) -> CalibrationOptions:
    return CalibrationOptions(results_root=tmp_path / "results", baselines_dir=baselines, jobs=2, **kw)


def test_calibrate_writes_a_candidate_with_provenance_and_promote_replaces(fake_case, tmp_path):
    case, baselines, repo = fake_case
    target, candidate, report = baseline_files(case, baselines)
    spec_text = target.read_text()
    outcome = calibrate_case(case, options(tmp_path, baselines, runs=3, command="rl-autotest calibrate x"))
    assert (outcome.candidate, outcome.report) == (candidate, report)
    assert target.read_text() == spec_text  # never silent: the baseline waits for promotion
    cand = load_baseline(candidate)
    prov = cand.provenance
    assert prov["produced_by"] == "rl-autotest calibrate" and prov["command"] == "rl-autotest calibrate x"
    assert prov["commit"]["sha"] == _git(repo, "rev-parse", "HEAD") and prov["commit"]["dirty"] is False
    assert prov["runs"] == 3 and prov["seeds"] == [0, 1, 2] and prov["margin"] == 1.5
    assert all(Path(p).is_file() for p in prov["trackers"])
    assert prov["environment"]["python"] and "packages" in prov["environment"]
    assert set(prov["self_check"]["held_out"]) == {"run 1 (seed 0)", "run 2 (seed 1)", "run 3 (seed 2)"}
    assert set(cand.golden_table) == {"response/rewards/mean", "mismatch/mismatch_k3_kl", "eval/accuracy",
                                      "time/step"}
    assert sorted(cand.golden_table["eval/accuracy"]) == [0, 5, 10]
    by_metric = {c.metric: c for c in cand.checks}
    # the runs' own k3 is fp32-sized (~1e-14): the declared bf16-sized floor 1e-4 is capped at 1000 x that level
    k3 = by_metric["mismatch/mismatch_k3_kl"]
    assert k3.threshold < 1e-10 and "calibration.floors 0.0001 capped at floor_headroom 1000" in k3.derivation
    # the eval-set size comes from the runs' saved config.json: the binomial floor applies
    assert "binomial 2 x sqrt(p(1-p)/n), n=20" in by_metric["eval/accuracy"].derivation
    assert all(c.measured_max_deviation is not None for c in cand.checks)
    text = report.read_text()
    for section in ("## Thresholds", "## Golden shift", "## Self-check (leave-one-out)", "## Runs",
                    f"rl-autotest baseline promote {case_argument(case)} --baselines-dir {baselines.resolve()}"):
        assert section in text
    assert (outcome.results_dir / "report.md").read_text() == text
    assert (outcome.results_dir / "preflight.json").is_file()

    assert promote(target).path == target
    assert load_baseline(target).provenance["produced_by"] == "rl-autotest calibrate"
    assert not candidate.exists() and not report.exists()
    with pytest.raises(UsageError, match="no candidate to promote"):
        promote(target)

    # the promoted baseline passes a fresh seed and fails an unsynced layer
    promoted = replace(case, baseline=str(target))
    for seed, fault, status in ((3, None, PASS), (3, "unsynced", FAIL)):
        run_dir = tmp_path / f"check-{seed}-{fault}"
        if fault:
            result = launch(launch_spec(promoted, run_dir / "work", seed=seed, fault=fault), run_dir)
            assert result.exit_code == 0
            tracker = artifacts_for(promoted, run_dir / "work", run_dir).tracker
        else:
            tracker = calibration_run(promoted, 1, seed, run_dir).tracker
        verdict = compare(load_baseline(target), read_trace(tracker)).verdict
        assert verdict.status == status, [r.message for r in verdict.failing()]


def test_second_calibration_diffs_against_the_current_baseline(fake_case, tmp_path):
    case, baselines, _ = fake_case
    calibrate_case(case, options(tmp_path, baselines, runs=2, promote=True))
    outcome = calibrate_case(case, options(tmp_path, baselines, runs=3))
    text = outcome.report.read_text()
    assert "| `response/rewards/mean` | 10 |" in text  # 10 common steps with the promoted golden
    assert any("N=2" in c.previous.derivation for c in outcome.calibration.checks)


def test_dirty_checkout_is_refused_before_anything_runs(fake_case, tmp_path):
    case, baselines, repo = fake_case
    (repo / "train.py").write_text((repo / "train.py").read_text() + "\n# local edit\n")
    with pytest.raises(UsageError, match=r"the commit under test has uncommitted changes; .* pass --allow-dirty"):
        calibrate_case(case, options(tmp_path, baselines, runs=2))
    assert not (tmp_path / "results").exists()
    outcome = calibrate_case(case, options(tmp_path, baselines, runs=2, allow_dirty=True))
    commit = load_baseline(outcome.candidate).provenance["commit"]
    assert commit["dirty"] is True and "1 file changed" in commit["diff_stat"]
    assert any("N=2 runs" in w for w in outcome.warnings)


def test_a_failed_run_aborts_and_writes_nothing(fake_case, tmp_path, monkeypatch):
    case, baselines, _ = fake_case
    monkeypatch.setenv("FAKE_CRASH_SEED", "1")
    with pytest.raises(CalibrationError, match=r"1 of 2 calibration runs did not complete, nothing written: "
                                               r"run 2 \(seed 1\): run exited with code 1"):
        calibrate_case(case, options(tmp_path, baselines, runs=2))
    _, candidate, report = baseline_files(case, baselines)
    assert not candidate.exists() and not report.exists()


def test_seeds_vary_from_the_case_or_repeat_the_default(fake_case, tmp_path):
    case, _, _ = fake_case
    assert calibration_seeds(case, 3) == (0, 1, 2)
    with pytest.raises(UsageError, match=r"seed.calibration: lists 4 seeds but 5 runs were asked"):
        calibration_seeds(case, 5)
    fixed = replace(case, launch=replace(case.launch, command=("python", "train.py")))  # takes no seed
    assert calibration_seeds(fixed, 3) == (4, 4, 4)  # the default seed, repeated
    unlisted = replace(case, seed=replace(case.seed, calibration=(), default=7))
    assert calibration_seeds(unlisted, 2) == (7, 7)


def test_spec_comes_from_the_baselines_dir_then_the_case(fake_case, tmp_path):
    case, baselines, _ = fake_case
    assert load_spec(case, baselines).name == "fake-calib"
    with pytest.raises(UsageError, match="does not exist; write the checks to calibrate there first"):
        load_spec(case, tmp_path / "elsewhere")


@pytest.mark.slow
def test_runs_as_ray_tasks_on_a_given_cluster(fake_case, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    case, baselines, _ = fake_case
    outcome = calibrate_case(case, options(tmp_path, baselines, runs=2, ray_address="local"))
    assert [r.status for r in outcome.runs] == ["PASS", "PASS"]
    assert load_baseline(outcome.candidate).provenance["seeds"] == [0, 1]


@pytest.mark.calibration
@pytest.mark.slow
def test_tiny_grpo_from_three_runs_passes_a_fresh_seed_and_fails_an_unsynced_layer(tmp_path, request):
    """End to end on the embedded GRPO workload (minutes): calibrate N=3 into a temp folder, promote, check."""
    from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case
    from autotest.suites.test_calibration import calibration_selected

    if not calibration_selected(request.config):
        pytest.skip("launches five tiny GRPO runs: run it with `pytest -m calibration`")
    case = load_case("tiny-grpo")
    baselines = tmp_path / "baselines"
    # the tree under development is usually dirty; the provenance records it
    outcome = calibrate_case(case, CalibrationOptions(results_root=tmp_path / "results", runs=3,
                                                      baselines_dir=baselines, allow_dirty=True))
    assert [r.seed for r in outcome.runs] == list(case.seed.calibration[:3])
    target = promote(baseline_files(case, baselines)[0])
    checked = replace(case, baseline=str(target))
    fresh = max(case.seed.calibration) + 1  # a seed no calibration run used
    runs = {}
    for label, seed, fault in (("fresh", fresh, None), ("unsynced", case.seed.default, "unsynced-layer")):
        runs[label] = run_case(checked, RunOptions(LaunchOptions(results_root=tmp_path / "checks", seed=seed,
                                                                 fault=fault),
                                                   publish=PublishOptions(with_plots=False)))
    fresh_run, unsynced = runs["fresh"], runs["unsynced"]
    assert fresh_run.status == PASS, [r.message for r in fresh_run.verdict.failing()]
    assert unsynced.status == FAIL
    failing = {r.metric for r in unsynced.verdict.results if r.status == FAIL and r.is_gate}
    assert "mismatch/mismatch_k3_kl" in failing


def test_from_history_takes_only_trusted_runs(fake_case, tmp_path):
    """Runs made with --fault that passed (the fault is below what the gates see) and a run a person untrusted
    are in the history, shown, but never in a golden built from it."""
    from autotest.history.drift import history_recorder
    from autotest.history.trust import mark_run
    from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case

    case, baselines, _ = fake_case
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    assert calibrate_case(case, options(tmp_path, baselines, runs=3, promote=True)).promoted_to is not None

    def gate_run(seed: int, fault: str | None):
        return run_case(case, RunOptions(LaunchOptions(results_root=tmp_path / "results", seed=seed, fault=fault),
                                         JudgeOptions(baseline_path=baselines / f"{case.name}.yaml"),
                                         PublishOptions(after_results=history_recorder(url))))

    clean = [gate_run(seed, None) for seed in (4, 5, 6)]
    faulty = [gate_run(seed, "mild") for seed in (7, 8)]  # after the clean ones: the latest passing runs
    assert [r.status for r in clean + faulty] == [PASS] * 5
    mark_run(url, str(clean[0].results_dir), trusted=False, why="this node was shared with a benchmark")
    outcome = calibrate_case(case, options(tmp_path, baselines, runs=5, from_history=True, history=url))
    taken = [entry["results_dir"] for entry in load_baseline(outcome.candidate).provenance["from_history"]]
    assert taken == [str(r.results_dir) for r in clean[1:]]
