"""Per-hardware thresholds: parsed with one clear line per mistake, picked by the GPU fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import for_hardware
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.inputs.hardware_overrides import HardwareOverride, pick

H200_NODE = {"models": ["NVIDIA H200"], "count": 8}
CHECKS = """checks:
  - {metric: eval/accuracy, method: absolute, operator: "<", threshold: 0.05}
  - {metric: time/step, method: absolute, operator: "<", threshold: 10,
     overrides: %s}
wall_time: {max_s: 2400, overrides: [{hardware: {gpu: H200}, max_s: 1800}]}
"""


def _baseline(tmp_path: Path, overrides: str) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text("golden:\n  table: {eval/accuracy: {1: 0.5}, time/step: {1: 8.0}}\n" + CHECKS % overrides)
    return path


def test_the_matching_override_replaces_the_default_and_says_for_which_hardware(tmp_path):
    baseline = load_baseline(_baseline(tmp_path, "[{hardware: {gpu: A100, count: 8}, threshold: 20},"
                                                 " {hardware: {gpu: H200, count: 8}, threshold: 15}]"))
    assert baseline.checks[1].threshold == 10 and baseline.wall_time_max_s == 2400  # the seed's defaults
    on_h200 = for_hardware(baseline, H200_NODE)
    assert on_h200.checks[1].threshold == 15 and on_h200.checks[1].hardware == "8 x H200"
    assert "absolute < 15 (threshold for 8 x H200)" in on_h200.checks[1].describe()
    assert on_h200.checks[0] == baseline.checks[0]
    assert (on_h200.wall_time_max_s, on_h200.wall_time_hardware) == (1800, "H200 (any count)")


@pytest.mark.parametrize("gpu", [
    {"models": ["NVIDIA H200"], "count": 4},  # the count differs
    {"models": ["NVIDIA H20"], "count": 8},  # H20 is not H200: whole words only
    {"models": [], "count": 0},  # a CPU machine
    None,
])
def test_other_hardware_keeps_the_default(tmp_path, gpu):
    baseline = load_baseline(_baseline(tmp_path, "[{hardware: {gpu: H200, count: 8}, threshold: 15}]"))
    check = for_hardware(baseline, gpu).checks[1]
    assert (check.threshold, check.hardware) == (10, None)


def test_the_first_matching_override_wins_and_words_match_any_order():
    overrides = [HardwareOverride("A100 80GB", None, 1.0), HardwareOverride("H100", 8, 2.0),
                 HardwareOverride("H100", None, 3.0)]
    assert pick(overrides, {"models": ["NVIDIA A100-SXM4-80GB"], "count": 8}).value == 1.0
    assert pick(overrides, {"models": ["NVIDIA H100 80GB HBM3"], "count": 8}).value == 2.0
    assert pick(overrides, {"models": ["NVIDIA H100 80GB HBM3"], "count": 2}).value == 3.0


def test_overrides_survive_a_rewrite_of_the_baseline(tmp_path):
    baseline = load_baseline(_baseline(tmp_path, "[{hardware: {gpu: H200, count: 8}, threshold: 15}]"))
    again = tmp_path / "again.yaml"
    again.write_text(baseline_yaml(baseline))
    assert load_baseline(again).checks[1].overrides == baseline.checks[1].overrides
    assert load_baseline(again).wall_time_overrides == baseline.wall_time_overrides


@pytest.mark.parametrize("overrides, message", [
    ("{gpu: H200}", "checks[1].overrides: {'gpu': 'H200'} is not a non-empty list"),
    ("[{hardware: {gpu: H200, count: 8}}]", "checks[1].overrides[0].threshold: required key is missing"),
    ("[{hardware: {gpu: H200, cuont: 8}, threshold: 15}]", "checks[1].overrides[0].hardware.cuont: unknown key; "
                                                           "did you mean 'count'?"),
    ("[{hardware: {gpu: H200, count: 0}, threshold: 15}]", "checks[1].overrides[0].hardware.count"),
    ("[{hardware: {gpu: '--'}, threshold: 15}]", "checks[1].overrides[0].hardware.gpu: '--' names no GPU model"),
    ("[{hardware: {gpu: H200}, threshold: '15'}]", "checks[1].overrides[0].threshold"),
    ("[{hardware: {gpu: H200}, threshold: -1}]", "checks[1].overrides[0].threshold: absolute error < -1 never passes"),
    ("[{hardware: {gpu: H200}, threshold: 15}, {hardware: {gpu: h200}, threshold: 12}]",
     "checks[1].overrides[1].hardware: h200 (any count) is listed twice"),
])
def test_each_bad_override_is_one_line_naming_the_key(tmp_path, overrides, message):
    path = _baseline(tmp_path, overrides)
    with pytest.raises(UsageError) as caught:
        load_baseline(path)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text, text
