"""The smoothed-log reading: a logger that writes an EMA of every scalar (the training unchanged) is logging, not the
eval path its lagging eval looks like; a calm run, a real eval change and a replicate mean are not read as one."""

from __future__ import annotations

import random
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from autotest.calibration.pooled_noise import least_roughness
from autotest.inputs.baseline import load_baseline
from autotest.judge.power import PowerAsk
from autotest.judge.smoothing_evidence import SMOOTHED, unsmoothed
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare, golden_trace, judge

STEPS = range(1, 41)
EVALS = (0, 10, 20, 30, 40)
REWARD, ENTROPY, EVAL = "response/rewards/mean", "entropy/mean", "eval/accuracy"
SD = {REWARD: 0.02, ENTROPY: 0.02, EVAL: 0.01}


def _golden() -> dict[str, dict[int, float]]:
    return {REWARD: {s: 0.1 + 0.02 * s for s in STEPS}, ENTROPY: {s: 2.0 - 0.03 * s for s in STEPS},
            EVAL: {s: 0.1 + 0.02 * s for s in EVALS}}


def _run(seed: int, calm: float = 1.0) -> dict[str, dict[int, float]]:
    """A clean run: the golden plus its per-step noise (``calm`` < 1: quieter than any calibration run)."""
    rng = random.Random(seed)
    return {m: {s: v + rng.gauss(0, SD[m] * calm) for s, v in series.items()} for m, series in _golden().items()}


def _trace(series: dict[str, dict[int, float]]) -> Trace:
    return Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                 train_steps=tuple(STEPS), eval_steps=EVALS)


def _ema(series: dict[str, dict[int, float]], weight: float) -> dict[str, dict[int, float]]:
    out = {}
    for metric, values in series.items():
        previous, smoothed = None, {}
        for step in sorted(values):
            previous = values[step] if previous is None else weight * previous + (1 - weight) * values[step]
            smoothed[step] = previous
        out[metric] = smoothed
    return out


def _baseline(tmp_path: Path, roughness: bool = True):
    """Calibrated as ``calibrate`` does: the golden is the mean of 10 clean runs, their noise the per-step sd."""
    calibration = [_run(seed) for seed in range(10)]
    table = {m: {s: sum(r[m][s] for r in calibration) / len(calibration) for s in series}
             for m, series in _golden().items()}
    noise = {m: {s: SD[m] for s in series} for m, series in _golden().items()}
    golden = {"table": table, "noise": noise}
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.1},
              {"metric": ENTROPY, "method": "absolute", "operator": "<", "threshold": 0.1},
              {"metric": EVAL, "method": "absolute", "operator": "<", "threshold": 0.05, "scope": "final"}]
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks, "calibration": {"runs": 10}}))
    if roughness:  # the calibration runs' least roughness, as calibrate records it
        base = load_baseline(path)
        least = least_roughness(base.noise_table, golden_trace(base), [_trace(run) for run in calibration])
        golden["roughness"] = least
        path.write_text(yaml.safe_dump({"golden": golden, "checks": checks, "calibration": {"runs": 10}}))
    return load_baseline(path)


def _reading(verdict):
    return next((m for m in verdict.measured if m.hypothesis == SMOOTHED), None)


def test_unsmoothed_inverts_the_moving_average() -> None:
    series = {1: 1.0, 2: 3.0, 3: 2.0, 4: 5.0}
    smoothed = _ema({"m": series}, 0.6)["m"]
    assert unsmoothed(smoothed, 0.6) == pytest.approx(series)


def test_every_metric_written_as_a_moving_average_is_logging_not_the_eval_path(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path), _trace(_ema(_run(101), 0.6))).verdict
    assert verdict.status == "FAIL" and [r.metric for r in verdict.results if r.status == "FAIL"] == [EVAL]
    reading = _reading(verdict)
    assert reading.holds and reading.values["weight"] in ("0.5", "0.6", "0.7")
    primary = verdict.triage[0]
    assert primary.rule == "logging-units" and "the logger smooths the scalars it writes" in primary.suggestion


def test_a_moving_average_over_a_run_whose_training_moved_is_not_only_logging(tmp_path: Path) -> None:
    """The row claims the training unchanged: a reward 3 sd up from step 15 (under its gate) under the average is
    not that, though every gate passes with the average undone."""
    run = _run(101)
    run[REWARD] = {s: v + (0.06 if s >= 15 else 0.0) for s, v in run[REWARD].items()}
    verdict = compare(_baseline(tmp_path), _trace(_ema(run, 0.6))).verdict
    reading = _reading(verdict)
    assert not reading.holds and "the training moved" in reading.finding and REWARD in reading.finding
    assert "logging-units" not in [f.rule for f in verdict.triage][:1]


def test_a_real_eval_drop_in_a_clean_run_is_the_eval_path(tmp_path: Path) -> None:
    run = _run(102)
    run[EVAL] = {s: v - 0.1 for s, v in run[EVAL].items()}
    verdict = compare(_baseline(tmp_path), _trace(run)).verdict
    reading = _reading(verdict)
    assert not reading.holds and "as rough as a calibration run" in reading.finding
    assert verdict.triage[0].rule == "eval-path"


def test_a_calm_run_whose_eval_dropped_is_not_a_smoothed_log(tmp_path: Path) -> None:
    """Calmer than every calibration run, but no average undone brings the eval back: not the logger."""
    run = _run(103, calm=0.3)
    run[EVAL] = {s: v - 0.1 for s, v in run[EVAL].items()}
    reading = _reading(compare(_baseline(tmp_path), _trace(run)).verdict)
    assert not reading.holds and "as rough as a calibration run that passes every gate" in reading.finding


def test_a_replicate_mean_is_read_in_the_means_noise(tmp_path: Path) -> None:
    """The mean of 8 clean runs is calmer than any one run; read in its own noise it is not a smoothed log."""
    runs = [_run(200 + i) for i in range(8)]
    mean = {m: {s: sum(r[m][s] for r in runs) / len(runs) for s in runs[0][m]} for m in runs[0]}
    mean[EVAL] = {s: v - 0.1 for s, v in mean[EVAL].items()}
    baseline = _baseline(tmp_path)
    as_one_run = _reading(judge(baseline, _trace(mean)).verdict)
    assert as_one_run.finding.startswith("every per-step metric smoother than the calmest calibration run")
    verdict = judge(baseline, _trace(mean), power=PowerAsk(replicates=8)).verdict
    reading = _reading(verdict)
    assert not reading.holds and "as rough as a calibration run" in reading.finding


def test_a_baseline_without_roughness_takes_no_reading(tmp_path: Path) -> None:
    verdict = compare(_baseline(tmp_path, roughness=False), _trace(_ema(_run(101), 0.6))).verdict
    assert _reading(verdict) is None and verdict.triage[0].rule == "eval-path"
