"""Paired A/B end to end on tiny-grpo, real runs: A/A pairs measure a paired noise that is not zero (the
perturbation makes pairs part), a learning-rate change fails the paired gates on one seed and the frozen-rollout
split places it in the trainer (a sampling change in the rollout), a broken equivalence
(the loss averaged per micro-batch) fails against the case while the variant itself passes. (An A/B without paired
noise is refused before any run: tests/unit/ab/test_ab_preflight.py.)"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from autotest.ab.aa import PairedCalibrationOptions, calibrate_paired
from autotest.ab.interleave import AB_JSON, AbOptions, run_ab
from autotest.ab.sides import parse_side
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.judge.model import ERROR, FAIL, PASS
from autotest.judge.replay_split import ROLLOUT, TRAINER
from tests.helpers import ROOT, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """tiny-grpo's baseline with a paired section from two A/A pairs (4 runs), in a folder of its own."""
    folder = tmp_path_factory.mktemp("ab")
    baselines = folder / "baselines"
    baselines.mkdir()
    shutil.copy(ROOT / "baselines" / "tiny-grpo.yaml", baselines / "tiny-grpo.yaml")
    case = load_case("tiny-grpo")
    outcome = calibrate_paired(case, PairedCalibrationOptions(runs=2, results_root=folder / "results",
                                                              baselines_dir=baselines, promote=True))
    return case, folder, load_baseline(outcome.promoted_to)


def test_aa_pairs_part_so_the_paired_noise_is_measured(calibrated):
    _, _, baseline = calibrated
    spec = baseline.paired
    assert spec.pairs == 2 and spec.perturbation == "RL_AUTOTEST_AA_PERTURB=1"
    rewards = [w for w in spec.windows if w.metric == "response/rewards/mean"]
    assert len(rewards) == 3 and any(w.noise > 0 for w in rewards)
    assert all(w.noise < 0.1 for w in rewards)  # an A/A pair stays close: far below the reward's range


def test_a_learning_rate_change_fails_paired_on_one_seed_and_splits_to_the_trainer(calibrated):
    case, folder, baseline = calibrated
    outcome = run_ab(case, parse_side(case, "base", "clean"), parse_side(case, "head", "fault:lr-scale:0.25"),
                     AbOptions(seeds=(11,), results_root=folder / "results", baseline_path=baseline.path,
                               with_plots=True, split=True, aa_check=True))
    assert outcome.status == FAIL, outcome.verdict.reason
    assert outcome.aa_check is not None and outcome.aa_check.status == PASS  # the noise holds on this runner
    failed = {r.metric for r in outcome.verdict.failed}
    assert "response/rewards/mean" in failed
    document = json.loads((outcome.folder / AB_JSON).read_text())
    assert document["status"] == FAIL and [r["side"] for r in document["runs"]] == ["base", "head", "base-again"]
    assert document["aa_check"] == {"status": PASS, "reason": "", "moved": []}
    assert (outcome.folder / "base-seed11" / "results.json").is_file()
    assert list(outcome.folder.glob("ab-*.png")) and "| gate | status |" in outcome.report.read_text()
    # the learning rate lives in the trainer: each side's trainer on the other's batches trains apart
    assert document["split"]["side"] == TRAINER, document["split"]
    assert [(r["trainer"], r["batches"]) for r in document["split"]["runs"]] == [("head", "base"), ("base", "head")]
    assert all(p["moved"] for p in document["split"]["pairings"])
    assert (outcome.folder / "rollouts" / "base-seed11" / "step-0045.pt").is_file()
    assert "## Which side: frozen-rollout split" in outcome.report.read_text()


def test_a_sampling_change_splits_to_the_rollout(tmp_path):
    case = load_case("tiny-grpo")
    outcome = run_ab(case, parse_side(case, "base", "clean"),
                     parse_side(case, "head", "fault:sampling-temperature:1.5"),
                     AbOptions(seeds=(11,), results_root=tmp_path, with_plots=False, split=True))
    assert outcome.status == FAIL, outcome.verdict.reason
    assert outcome.split is not None and outcome.split.finding.side == ROLLOUT, outcome.split.finding.summary
    assert not any(p.moved for p in outcome.split.finding.pairings)


# The equivalence tests judge against the case's committed paired noise (10 A/A pairs): two pairs leave the t
# quantile so wide (df = 2) that whether one seed shows a change depends on the machine's numerics.


def test_a_broken_equivalence_fails_against_the_case(tmp_path):
    case = load_case("tiny-grpo")
    base = parse_side(case, "base", "fault:loss-per-microbatch")  # bitwise clean at one micro-batch
    head = parse_side(case, "head", "variant:grad-accum-4+fault:loss-per-microbatch")
    outcome = run_ab(case, base, head, AbOptions(seeds=(11,), results_root=tmp_path, with_plots=False))
    assert outcome.status == FAIL, [r.message for r in outcome.verdict.results]
    # micro-batches of short responses weigh their tokens more: the early length and reward move, not only noise
    early = {r.metric for r in outcome.verdict.failed if r.window[0] <= 1}
    assert {"response/response_len/mean", "response/rewards/mean"} <= early, early


def test_a_kept_equivalence_passes_against_the_case(tmp_path):
    case = load_case("tiny-grpo")
    outcome = run_ab(case, parse_side(case, "base", "clean"), parse_side(case, "head", "variant:grad-accum-4"),
                     AbOptions(seeds=(11,), results_root=tmp_path, with_plots=False))
    assert outcome.status == PASS, [r.message for r in outcome.verdict.failed]


def test_an_a_a_guard_that_moves_leaves_the_a_b_unjudged(tmp_path):
    # paired noise "measured elsewhere", a thousandth of what A/A pairs part by here: the guard (the base again,
    # nudged as the A/A pairs were) moves beyond it, so the head's difference cannot be told from this runner's noise
    spec = yaml.safe_load((ROOT / "baselines" / "tiny-grpo.yaml").read_text())
    spec["paired"]["relative_floor"] = 1e-9
    for window in spec["paired"]["windows"]:
        window["noise"] = window["noise"] / 1000
        window.pop("floor", None)
    (tmp_path / "baselines").mkdir()
    baseline = tmp_path / "baselines" / "tiny-grpo.yaml"
    baseline.write_text(yaml.safe_dump(spec, sort_keys=False))
    case = load_case("tiny-grpo")
    outcome = run_ab(case, parse_side(case, "base", "clean"), parse_side(case, "head", "fault:lr-scale:0.7"),
                     AbOptions(seeds=(11,), results_root=tmp_path / "results", baseline_path=baseline,
                               with_plots=False, aa_check=True))
    assert outcome.aa_check is not None and outcome.aa_check.status == FAIL
    assert outcome.status == ERROR and "the A/A guard (the base twice" in outcome.verdict.reason
    assert any(r.status == FAIL for r in outcome.verdict.results)  # the head moved too, but it is not a verdict
    document = json.loads((outcome.folder / AB_JSON).read_text())
    assert document["aa_check"]["moved"] and [r["side"] for r in document["runs"]] == ["base", "head", "base-again"]


def test_split_without_a_replay_section_is_refused_before_any_run(tmp_path):
    case_file = tmp_path / "tiny-grpo.yaml"
    spec = yaml.safe_load((ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text())
    spec.pop("replay")
    spec["baseline"] = str(ROOT / "baselines" / "tiny-grpo.yaml")
    case_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    code = run_cli("ab", str(case_file), "--base", "clean", "--head", "clean", "--seeds", "11", "--split",
                   "--results-dir", str(tmp_path / "results"), "--no-plots")
    assert code == 2 and not (tmp_path / "results").exists()
