"""The logging/units reading holds the rule to what its row says (issue 44): "a constant factor at every step" is a
ratio constant within the metric's noise, and "nothing else moved" is every other gated metric within its own noise
against the golden at every step, not "no other gate failed". Each test feeds a run where one claim is false."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.judge.trace import Trace
from autotest.judge.units_evidence import UNITS
from autotest.judge.verdict import compare
from autotest.inputs.baseline import load_baseline

STEPS = range(1, 31)
REWARD, ENTROPY, LENGTH = "response/rewards/mean", "entropy/mean", "response/response_len/mean"
NOISE = {REWARD: 0.01, ENTROPY: 0.01, LENGTH: 0.1}


def _golden() -> dict[str, dict[int, float]]:
    return {REWARD: {s: 0.2 + 0.02 * s for s in STEPS}, ENTROPY: {s: 2.0 - 0.03 * s for s in STEPS},
            LENGTH: {s: 10.0 - 0.1 * s for s in STEPS}}


def _baseline(tmp_path: Path, noise: bool = True):
    # the length gated on its median step (a percentile gate): a ratio that swings around its median passes such a
    # gate once divided by the median, which is why the gate alone cannot say "constant"
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.03},
              {"metric": ENTROPY, "method": "absolute", "operator": "<", "threshold": 0.1},
              {"metric": LENGTH, "method": "relative", "operator": "<", "threshold": 0.15, "scope": "percentile",
               "percentile": 50}]
    golden = {"table": _golden()}
    if noise:
        golden["noise"] = {m: {s: NOISE[m] for s in STEPS} for m in NOISE}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    return load_baseline(path)


def _trace(length_ratio, entropy_shift=lambda s: 0.0) -> Trace:
    gold = _golden()
    series = {REWARD: gold[REWARD], ENTROPY: {s: v + entropy_shift(s) for s, v in gold[ENTROPY].items()},
              LENGTH: {s: v * length_ratio(s) for s, v in gold[LENGTH].items()}}
    return Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                 train_steps=tuple(STEPS))


def _swinging(s: int) -> float:
    """The golden's at the first step (before any update), then a ratio from 0.93 to 1.64, median about 1.23 (the
    reported loss-aggregation change's length)."""
    return 1.0 if s == 1 else (0.93, 1.1, 1.23, 1.35, 1.64)[s % 5]


def _units(verdict):
    return next(m for m in verdict.measured if m.hypothesis == UNITS)


def test_a_ratio_that_swings_is_not_a_constant_factor(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(_swinging)).verdict
    assert verdict.status == "FAIL"
    units = _units(verdict)
    assert not units.holds and "leaves its per-step noise" in units.finding
    assert "0.93 to 1.64" in units.finding  # the spread the claim was tested against is shown
    assert "logging-units" not in [f.rule for f in verdict.triage]


def test_a_ratio_that_swings_is_not_a_constant_factor_without_a_noise_table_either(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path, noise=False), _trace(_swinging)).verdict
    units = _units(verdict)
    assert not units.holds and "more than 10% of the factor" in units.finding
    assert "logging-units" not in [f.rule for f in verdict.triage]


def test_a_constant_factor_while_the_entropy_left_its_noise_under_its_gate_is_not_logging(tmp_path: Path) -> None:
    """Entropy 5 sd off from step 10, under its gate's threshold: every other gate passed, yet something moved."""
    verdict = compare(_baseline(tmp_path), _trace(lambda s: 2.0, lambda s: 0.05 if s >= 10 else 0.0)).verdict
    assert all(r.status == "PASS" for r in verdict.results if r.metric == ENTROPY and r.is_gate)
    units = _units(verdict)
    assert not units.holds and "entropy/mean left its per-step noise" in units.finding
    assert "logging-units" not in [f.rule for f in verdict.triage]


def test_a_constant_factor_with_nothing_else_moved_holds_and_says_what_it_tested(tmp_path: Path) -> None:
    """The control: the same run with the claims true is read as logging, its line saying what was tested."""
    verdict = compare(_baseline(tmp_path), _trace(lambda s: 2.0)).verdict
    units = _units(verdict)
    assert units.holds and "divided by 2 it stays within its per-step noise at every step" in units.finding
    primary = verdict.triage[0]
    assert primary.rule == "logging-units"
    assert "while nothing else moved (every other gated metric within its per-step noise against the golden at " \
           "every step)" in primary.suggestion


def test_an_offset_that_grows_is_not_a_constant_offset(tmp_path: Path) -> None:
    """The length the golden's at the first step, then off by up to +3: its median offset passes a percentile gate, not
    the noise."""
    verdict = compare(_baseline(tmp_path), _trace(lambda s: 1 + (3 * (s - 1) / 29) / (10 - 0.1 * s))).verdict
    units = _units(verdict)
    assert not units.holds
    assert "logging-units" not in [f.rule for f in verdict.triage]
