"""The loss-term reading (issue 30): a training role that leaves the golden one way from the first update, steps
before the scores, against the baseline's per-step noise, and how it ranks against the step size."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.onset_evidence import LOSS_TERM, ONSET_LEAD, STEADY_RMS
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare

STEPS = range(1, 31)
REWARD, ENTROPY, LENGTH = "response/rewards/mean", "entropy/mean", "response/response_len/mean"
NOISE = 0.01


def _golden() -> dict[str, dict[int, float]]:
    return {REWARD: {s: 0.2 + 0.02 * s for s in STEPS}, ENTROPY: {s: 2.0 - 0.03 * s for s in STEPS},
            LENGTH: {s: 10.0 for s in STEPS}}


def _baseline(tmp_path: Path, noise: bool = True):
    # the entropy gate is wide: the reading counts moves under a role's own threshold
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.05},
              {"metric": ENTROPY, "method": "absolute", "operator": "<", "threshold": 0.5},
              {"metric": LENGTH, "method": "relative", "operator": "<", "threshold": 0.5}]
    golden = {"table": _golden()}
    if noise:
        golden["noise"] = {m: {s: NOISE for s in STEPS} for m in _golden()}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    return load_baseline(path)


def _trace(entropy_z, rewards_from: int) -> Trace:
    """The golden with entropy moved by ``entropy_z(step)`` noise sds and rewards 0.1 lower from ``rewards_from``."""
    current = {m: dict(series) for m, series in _golden().items()}
    for s in STEPS:
        current[ENTROPY][s] += entropy_z(s) * NOISE
        if s >= rewards_from:
            current[REWARD][s] -= 0.1
    return Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in current.items()}),
                 train_steps=tuple(STEPS))


def _reading(verdict):
    return next(m for m in verdict.measured if m.hypothesis == LOSS_TERM)


def steady(s: int) -> float:
    return -0.3 if s == 1 else -2.5 - 0.7 * (s - 2)


def test_a_steady_lead_after_a_golden_first_step_is_a_loss_term_named_with_the_step_size(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(steady, rewards_from=12)).verdict
    assert verdict.status == "FAIL"
    primary = verdict.triage[0]
    assert primary.rule == "loss-term" and primary.uncertain_with == "gradual"
    assert ("a loss term changed (a regulariser's sign or weight: entropy bonus, KL or length penalty, a loss "
            "coefficient): entropy/mean left the golden below it from step 2, 10 steps before the scores") \
        in primary.suggestion
    assert "diff the loss's terms and coefficients and the optimiser's step size" in primary.next_step
    reading = _reading(verdict)
    assert reading.holds and reading.values["steady"] == "yes" and reading.values["lead"] == "10"
    assert "steadily (step-to-step change rms 0.7 sd" in reading.finding


def test_a_lead_in_jumps_ranks_the_step_size_first_and_names_the_loss_term(tmp_path: Path) -> None:
    def jumpy(s: int) -> float:
        return -0.3 if s == 1 else (-3.0 if s % 2 else -3.0 - 2 * STEADY_RMS)

    verdict = compare(_baseline(tmp_path), _trace(jumpy, rewards_from=12)).verdict
    assert [f.rule for f in verdict.triage[:2]] == ["gradual", "loss-term"]
    assert verdict.triage[0].uncertain_with == "loss-term"
    reading = _reading(verdict)
    assert reading.holds and reading.values["steady"] == "no" and "in jumps" in reading.finding


def test_a_role_moved_at_the_first_step_is_not_a_loss_term(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(lambda s: -2.5 - 0.7 * s, rewards_from=12)).verdict
    reading = _reading(verdict)
    assert not reading.holds and "it moved at the first step, before any update" in reading.finding
    assert "loss-term" not in [f.rule for f in verdict.triage]


def test_scores_that_move_with_the_role_are_the_whole_update(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(steady, rewards_from=2 + ONSET_LEAD - 1)).verdict
    reading = _reading(verdict)
    assert not reading.holds and f"the scores moved within {ONSET_LEAD} steps of it" in reading.finding
    # entropy moved first, under its own gate: the policy changed, so not "the same responses scored differently"
    assert reading.values["led"] == "yes"
    assert verdict.triage[0].rule == "gradual" and not verdict.triage[0].uncertain_with
    assert "rewards-only" not in [f.rule for f in verdict.triage]


def test_rewards_that_move_first_under_a_quiet_policy_stay_rewards_only(tmp_path: Path) -> None:
    """A judger change: rewards from step 1, entropy within noise: nothing led them."""
    verdict = compare(_baseline(tmp_path), _trace(lambda s: 0.5, rewards_from=1)).verdict
    assert verdict.triage[0].rule == "rewards-only"


def test_no_role_that_left_the_golden_and_no_noise_table_say_so_or_nothing(tmp_path: Path) -> None:
    still = compare(_baseline(tmp_path), _trace(lambda s: 1.0, rewards_from=12)).verdict
    assert not _reading(still).holds and "no training role left the golden" in _reading(still).finding
    unmeasured = compare(_baseline(tmp_path, noise=False), _trace(steady, rewards_from=12)).verdict
    assert LOSS_TERM not in [m.hypothesis for m in unmeasured.measured]


def test_a_passing_run_takes_no_reading(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(lambda s: 0.0, rewards_from=99)).verdict
    assert verdict.status == "PASS" and not verdict.measured


def test_entropy_leading_up_while_the_scores_rise_is_a_narrower_sampler_not_a_loss_term(tmp_path: Path) -> None:
    """top-p on seed 11: entropy above the golden from step 4, steadily, the rewards above it later. A loss term that
    raises entropy makes the policy explore, not score better; a sampler that never draws the tail leaves it
    untrained: the narrower-sampler rule ranks first."""
    mismatch = "mismatch/mismatch_k3_kl"  # checked and in bounds: the trainer and the rollout agree
    golden = {m: v for m, v in _golden().items() if m != LENGTH}
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.05},
              {"metric": ENTROPY, "method": "absolute", "operator": "<", "threshold": 0.15},
              {"metric": mismatch, "method": "value", "operator": "<=", "threshold": 1e-3}]
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": golden, "noise": {m: {s: NOISE for s in STEPS} for m in
                                                                          (REWARD, ENTROPY)}}, "checks": checks}))
    current = {**{m: dict(series) for m, series in golden.items()}, mismatch: {s: 1e-6 for s in STEPS}}
    for s in STEPS:
        current[ENTROPY][s] += 0.0 if s < 4 else NOISE * (2.5 + 0.7 * (s - 4))  # steadily up from step 4
        if s >= 15:
            current[REWARD][s] += 0.1
    trace = Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in current.items()}),
                  train_steps=tuple(STEPS))
    verdict = compare(load_baseline(path), trace).verdict
    reading = _reading(verdict)
    assert reading.holds and reading.values["steady"] == "yes"  # the loss-term reading alone would rank it first
    rules = [f.rule for f in verdict.triage]
    assert rules[0] == "sampling-changed" and "narrower distribution" in verdict.triage[0].suggestion
    assert "loss-term" in rules[1:]
