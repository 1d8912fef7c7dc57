"""A/A pairs (autotest.ab.aa): what paired calibration refuses before any run."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.ab.aa import PairedCalibrationOptions, calibrate_paired
from autotest.errors import UsageError
from autotest.inputs.case import load_case
from tests.helpers import DATA


def test_pairs_that_would_repeat_one_seed_are_refused_before_any_run(tmp_path: Path, monkeypatch) -> None:
    # the scripted case takes a seed but lists no seed.calibration: every pair would run seed 0
    monkeypatch.setattr("autotest.ab.aa.run_case", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(UsageError) as caught:
        calibrate_paired(load_case(DATA / "cases" / "scripted.yaml"),
                         PairedCalibrationOptions(runs=2, results_root=tmp_path))
    line = str(caught.value)
    assert "\n" not in line and "seed.calibration: paired noise needs 2 distinct seeds" in line
    assert "gives [0]" in line and not list(tmp_path.iterdir())
