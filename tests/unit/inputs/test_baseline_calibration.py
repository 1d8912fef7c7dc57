from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import CalibrationSpec, load_baseline
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
    ("runs: 1", "calibration.runs: 1 is below 2; write 2 or more (run-to-run noise needs two runs)"),
    ("margin: 0.5", "calibration.margin: 0.5 is below 1; write 1 or more (a margin below 1 flags the calibration "
                    "runs themselves)"),
    ("relative_floor: -1", "calibration.relative_floor: -1 is below 0; write a fraction >= 0, e.g. 0.01"),
    ("binomial_z: 0", "calibration.binomial_z: 0 is not above 0; write e.g. 2"),
    ("margins: 2", "calibration.margins: unknown key; did you mean 'margin'?"),
    ("floorz: {}", "calibration.floorz: unknown key; did you mean 'floors'?"),
    ("floors: {k4: 1.0}", "calibration.floors.k4: no check uses this metric; fix the name or remove it"),
    ("floors: {k3: 0}", "calibration.floors.k3: 0 is not above 0; write a positive number in the metric's units"),
    ("floors: {k3: high}", "calibration.floors.k3: 'high' is not a number; write a positive number in the metric's "
                           "units"),
    ("eval_set_size: {eval/accuracy: 18.5}", "calibration.eval_set_size.eval/accuracy: 18.5 is not a whole number; "
                                             "write the number of eval items, e.g. 200"),
    ("floors: [1]", "calibration.floors: [1] is not a mapping; write key: value lines"),
])
def test_bad_calibration_sections_name_the_key(tmp_path, body, message):
    path = write_yaml(tmp_path / "b.yaml", HEAD + "calibration:\n  " + body + "\n")
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert str(info.value) == f"{path}: {message}"
