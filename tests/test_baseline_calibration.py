from __future__ import annotations

import pytest

from autotest.baseline import CalibrationSpec, load_baseline
from autotest.errors import UsageError
from tests.helpers import write_yaml

HEAD = """schema_version: 1
golden: {table: {}}
checks:
  - {metric: k3, method: absolute, operator: "<=", threshold: 0.0001}
  - {metric: eval/accuracy, method: absolute, operator: "<", threshold: 0.05, scope: final}
"""


def test_spec_only_baseline_with_calibration_section(tmp_path):
    path = write_yaml(tmp_path / "b.yaml", HEAD + """calibration:
  runs: 5
  margin: 2
  relative_floor: 0.02
  binomial_z: 1.5
  floors: {k3: 1.0e-4}
  eval_set_size: {eval/accuracy: 18}
""")
    b = load_baseline(path)
    assert dict(b.golden_table) == {}
    c = b.calibration
    assert (c.runs, c.margin, c.relative_floor, c.binomial_z) == (5, 2.0, 0.02, 1.5)
    assert dict(c.floors) == {"k3": 1e-4} and dict(c.eval_set_size) == {"eval/accuracy": 18}


def test_calibration_section_is_optional_and_defaults_are_the_seeds():
    assert CalibrationSpec().margin == 1.5 and CalibrationSpec().runs == 3


def test_absent_section_is_none(tmp_path):
    assert load_baseline(write_yaml(tmp_path / "b.yaml", HEAD)).calibration is None


@pytest.mark.parametrize("body,message", [
    ("runs: 1", "calibration.runs: must be >= 2 (run-to-run noise needs two runs), got 1"),
    ("margin: 0.5", "calibration.margin: must be >= 1 (a margin below 1 flags the calibration runs themselves), "
                    "got 0.5"),
    ("relative_floor: -1", "calibration.relative_floor: must be >= 0, got -1"),
    ("binomial_z: 0", "calibration.binomial_z: must be > 0, got 0"),
    ("margins: 2", "calibration.margins: unknown key; expected one of: binomial_z, eval_set_size, floors, margin, "
                   "relative_floor, runs"),
    ("floors: {k4: 1.0}", "calibration.floors.k4: no check uses this metric; fix the name or remove it"),
    ("floors: {k3: 0}", "calibration.floors.k3: must be > 0, got 0"),
    ("floors: {k3: high}", "calibration.floors.k3: must be a number, got 'high'"),
    ("eval_set_size: {eval/accuracy: 18.5}", "calibration.eval_set_size.eval/accuracy: must be an integer, got 18.5"),
    ("floors: [1]", "calibration.floors: must be a mapping, got list"),
])
def test_bad_calibration_sections_name_the_key(tmp_path, body, message):
    path = write_yaml(tmp_path / "b.yaml", HEAD + "calibration:\n  " + body + "\n")
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert str(info.value) == f"{path}: {message}"
