"""Readings against the baseline's per-step noise (issue 30): a metric that moved alone from its first step or is
the golden smoothed (logging), and a response length off at the first step with the entropy the golden's (the
sampler, before any update)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.onset_evidence import FIRST_STEP
from autotest.judge.units_evidence import UNITS, _ema
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare

STEPS = range(1, 31)
REWARD, ENTROPY, LENGTH = "response/rewards/mean", "entropy/mean", "response/response_len/mean"
NOISE = {REWARD: 0.01, ENTROPY: 0.01, LENGTH: 0.1}


def _golden() -> dict[str, dict[int, float]]:
    return {REWARD: {s: 0.2 + 0.02 * s for s in STEPS}, ENTROPY: {s: 2.0 - 0.03 * s for s in STEPS},
            LENGTH: {s: 10.0 - 0.1 * s for s in STEPS}}


def _baseline(tmp_path: Path):
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.03},
              {"metric": ENTROPY, "method": "absolute", "operator": "<", "threshold": 0.1},
              {"metric": LENGTH, "method": "relative", "operator": "<", "threshold": 0.1}]
    golden = {"table": _golden(), "noise": {m: {s: NOISE[m] for s in STEPS} for m in NOISE}}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    return load_baseline(path)


def _trace(**changed: dict[int, float]) -> Trace:
    series = {m: dict(v) for m, v in _golden().items()}
    for key, values in changed.items():
        series[{"reward": REWARD, "entropy": ENTROPY, "length": LENGTH}[key]].update(values)
    return Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                 train_steps=tuple(STEPS))


def _reading(verdict, hypothesis: str):
    return next(m for m in verdict.measured if m.hypothesis == hypothesis)


def test_a_length_computed_otherwise_from_step_1_with_nothing_else_moved_is_logging(tmp_path: Path) -> None:
    """The padded width logged as the mean: no constant factor, yet nothing the training does moved."""
    verdict = compare(_baseline(tmp_path), _trace(length={s: 12.0 + 0.3 * (s % 3) for s in STEPS})).verdict
    primary = verdict.triage[0]
    assert primary.rule == "logging-units"
    assert ("is off the golden from its first logged step, before any update (not a constant factor, offset or "
            "smoothing) at every step while nothing else moved (every other gated metric within its per-step noise "
            "against the golden at every step)") in primary.suggestion
    units = _reading(verdict, UNITS)
    assert units.holds and units.values["kind"] == "computed" and "before any update" in units.finding


def test_a_length_off_from_step_1_while_entropy_follows_is_not_logging(tmp_path: Path) -> None:
    """The sampler changed (sampling never stops): length off at step 1, the entropy moves from the first update."""
    entropy = {s: _golden()[ENTROPY][s] + (0.05 if s > 1 else 0.0) for s in STEPS}
    verdict = compare(_baseline(tmp_path), _trace(length={s: 12.0 for s in STEPS}, entropy=entropy)).verdict
    assert not _reading(verdict, UNITS).holds  # the entropy left its noise: the training changed
    first = _reading(verdict, FIRST_STEP)
    assert first.holds and first.values["moved"] == "response_length" and first.values["entropy"] == "no"
    primary = verdict.triage[0]
    assert primary.rule == "sampling-changed" and "how sampling stops" in primary.suggestion


def test_entropy_off_at_step_1_is_the_initial_policy_not_the_sampler(tmp_path: Path) -> None:
    entropy = {s: _golden()[ENTROPY][s] + 0.2 for s in STEPS}
    verdict = compare(_baseline(tmp_path), _trace(length={s: 12.0 for s in STEPS}, entropy=entropy)).verdict
    first = _reading(verdict, FIRST_STEP)
    assert first.holds and first.values["entropy"] == "yes"
    assert verdict.triage[0].rule == "first-step"


def test_a_reward_that_is_the_golden_smoothed_is_logging(tmp_path: Path) -> None:
    """The tracker applies an EMA at write time: the curve lags its golden by the slope, every step."""
    smoothed = _ema(_golden()[REWARD], 0.8)
    verdict = compare(_baseline(tmp_path), _trace(reward=smoothed)).verdict
    units = _reading(verdict, UNITS)
    assert units.holds and units.values["kind"] == "smoothing" and units.values["amount"] == "0.8"
    rules = [f.rule for f in verdict.triage]
    assert "logging-units" in rules[:2]  # a score: the judger fits as well, so both are named


def test_a_drop_after_a_few_steps_is_not_read_as_smoothing(tmp_path: Path) -> None:
    """A trend's lag looks like an offset: the smoothed golden must fit within the noise at every step, not only
    the gates."""
    reward = {s: _golden()[REWARD][s] - (0.08 if s >= 6 else 0.0) for s in STEPS}
    verdict = compare(_baseline(tmp_path), _trace(reward=reward)).verdict
    assert not _reading(verdict, UNITS).holds
