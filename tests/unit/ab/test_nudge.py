"""The environment of an A/A pair's nudged run (autotest.ab.nudge), its default, and the line for a nudge that did
not take."""

from __future__ import annotations

import os

from autotest.ab.nudge import ATTACH_DIR, EMBEDDED, HARNESS, default_perturbation, no_effect_line, nudge_env
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from tests.helpers import DATA


def test_each_form_becomes_its_variables() -> None:
    assert nudge_env("natural", {}) == {}
    assert nudge_env("RL_AUTOTEST_AA_PERTURB=2", {}) == {"RL_AUTOTEST_AA_PERTURB": "2"}
    assert nudge_env("threads:3", {}) == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"}
    assert nudge_env("optimizer-ulp:4", {"PYTHONPATH": "/theirs"}) == {
        "RL_AUTOTEST_AA_NUDGE": "4", "PYTHONPATH": f"{ATTACH_DIR}{os.pathsep}/theirs"}
    assert nudge_env("optimizer-ulp:1", {})["PYTHONPATH"] == str(ATTACH_DIR)
    assert (ATTACH_DIR / "sitecustomize.py").is_file() and (ATTACH_DIR / "rl_autotest_nudge.py").is_file()


def test_the_default_is_the_baselines_then_by_kind_of_trainer() -> None:
    embedded = load_case("tiny-grpo")
    baseline = load_baseline(embedded.baseline_path)
    assert baseline.paired is not None and default_perturbation(embedded, baseline) == baseline.paired.perturbation
    bare = baseline.__class__(**{**baseline.__dict__, "paired": None})
    assert default_perturbation(embedded, bare) == EMBEDDED
    scripted = load_case(DATA / "cases" / "scripted.yaml")
    assert default_perturbation(scripted, bare) == HARNESS


def test_a_nudge_that_did_not_take_is_one_line_naming_another() -> None:
    case = load_case("tiny-grpo")
    line = no_effect_line(case, "threads:2", [0, 1], 2)
    assert "\n" not in line and line.startswith("every A/A pair agreed bitwise on every paired metric")
    assert "the nudge threads:2 had no effect" in line
    assert "rl-autotest calibrate tiny-grpo --paired --perturbation optimizer-ulp:1" in line
    some = no_effect_line(case, "optimizer-ulp:1", [3], 4)
    assert some.startswith("A/A pair(s) of seed 3 agreed") and "--perturbation threads:2" in some
    assert "optimizer is a torch.optim.Optimizer and the launch keeps PYTHONPATH" in some


def test_an_aa_guard_whose_pair_agreed_bitwise_says_it_checked_nothing(tmp_path) -> None:
    from autotest.ab.interleave import AA_LABEL, AbOutcome, _guarded
    from autotest.ab.sides import Side
    from autotest.judge.model import PASS
    from autotest.judge.paired import PairedVerdict
    from autotest.judge.trace import Trace

    case = load_case("tiny-grpo")
    baseline = load_baseline(case.baseline_path)
    steps = range(1, 46)
    metrics = ("response/rewards/mean", "mismatch/mismatch_k3_kl")
    base = Trace("a", {m: {s: 0.5 for s in steps} for m in metrics}, train_steps=tuple(steps))
    moved = Trace("b", {m: {s: 0.5 + (1e-9 if s == 40 else 0) for s in steps} for m in metrics},
                  train_steps=tuple(steps))
    outcome = AbOutcome("tiny-grpo", Side("base", "clean"), Side("head", "clean"),
                        PairedVerdict(PASS, (), (11, 12)), (), tmp_path)
    guarded = _guarded(outcome, baseline, {("base", 11): base, (AA_LABEL, 11): base, ("base", 12): base,
                                           (AA_LABEL, 12): moved}, case)
    assert guarded.verdict.warnings == (
        "A/A guard: " + no_effect_line(case, baseline.paired.perturbation, [11], 2),)
    assert guarded.verdict.warnings[0].startswith("A/A guard: A/A pair(s) of seed 11 agreed bitwise")
    clean = _guarded(outcome, baseline, {("base", 11): base, (AA_LABEL, 11): moved}, case)
    assert clean.verdict.warnings == ()
