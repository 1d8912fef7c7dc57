"""One metric moved alone, in time (issue 44): a metric logged from the previous step, the others unchanged, is read as
logging by the golden gates' triage; the same metric shifted while another metric left its noise is not."""

from __future__ import annotations

import math
from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.shift_evidence import exact_shift, noise_shift
from autotest.judge.trace import Trace
from autotest.judge.units_evidence import UNITS
from autotest.judge.verdict import compare

STEPS = range(1, 31)
REWARD, ENTROPY, LENGTH = "response/rewards/mean", "entropy/mean", "response/response_len/mean"
NOISE = {REWARD: 0.01, ENTROPY: 0.01, LENGTH: 0.1}


def _golden() -> dict[str, dict[int, float]]:
    # the length zig-zags from step to step (far more than its noise), so one step late is far off the golden
    return {REWARD: {s: 0.2 + 0.02 * s for s in STEPS}, ENTROPY: {s: 2.0 - 0.03 * s for s in STEPS},
            LENGTH: {s: 10.0 + 4 * math.sin(s) for s in STEPS}}


def _baseline(tmp_path: Path):
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.03},
              {"metric": ENTROPY, "method": "absolute", "operator": "<", "threshold": 0.1},
              {"metric": LENGTH, "method": "relative", "operator": "<", "threshold": 0.15}]
    golden = {"table": _golden(), "noise": {m: {s: NOISE[m] for s in STEPS} for m in NOISE}}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    return load_baseline(path)


def _late(series: dict[int, float], k: int = 1) -> dict[int, float]:
    """What a logger writing the value of k steps earlier logs (the first steps as they are: nothing before them)."""
    return {s: series.get(s - k, v) for s, v in series.items()}


def _trace(length: dict[int, float], entropy_shift: float = 0.0) -> Trace:
    gold = _golden()
    entropy = {s: v + (entropy_shift if s >= 10 else 0.0) for s, v in gold[ENTROPY].items()}
    series = {REWARD: gold[REWARD], ENTROPY: entropy, LENGTH: length}
    return Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                 train_steps=tuple(STEPS))


def _units(verdict):
    return next(m for m in verdict.measured if m.hypothesis == UNITS)


def test_a_length_logged_from_the_previous_step_is_logging(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(_late(_golden()[LENGTH]))).verdict
    assert verdict.status == "FAIL"
    units = _units(verdict)
    assert units.holds and units.values["kind"] == "shifted" and units.values["amount"] == "+1"
    primary = verdict.triage[0]
    assert primary.rule == "logging-units"
    assert "moved +1 step (logged from the previous step" in primary.suggestion


def test_a_length_logged_from_two_steps_later_is_named_so(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(_late(_golden()[LENGTH], -2))).verdict
    units = _units(verdict)
    assert units.holds and units.values["amount"] == "-2" and "logged from 2 steps later" in units.finding


def test_a_shifted_length_while_the_entropy_left_its_noise_is_not_logging(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(_late(_golden()[LENGTH]), entropy_shift=0.05)).verdict
    units = _units(verdict)
    assert not units.holds and "entropy/mean left its per-step noise" in units.finding
    assert "logging-units" not in [f.rule for f in verdict.triage]


def test_noise_shift_needs_the_unshifted_series_off_and_the_shifted_one_within_noise() -> None:
    gold = _golden()[LENGTH]
    noise = dict.fromkeys(STEPS, 0.1)
    assert noise_shift(gold, gold, noise) is None  # not off the golden: nothing to explain
    k, count, unshifted = noise_shift(_late(gold), gold, noise)
    assert k == 1 and count == 29 and "sd at step" in unshifted
    scaled = {s: v * 1.3 for s, v in gold.items()}
    assert noise_shift(scaled, gold, noise) is None  # off, and no shift brings it back


def test_exact_shift_reads_a_value_logged_from_the_previous_step() -> None:
    before = {s: float(s * s) for s in range(1, 10)}
    assert exact_shift(before, before, [5, 6, 7]) is None  # equal: no shift
    assert exact_shift(_late(before), before, [5, 6, 7]) == (1, 3)
    other = {**before, 6: 0.5}
    assert exact_shift(other, before, [5, 6, 7]) is None  # one value otherwise: not a shift
