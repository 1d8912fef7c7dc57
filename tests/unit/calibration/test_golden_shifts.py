"""How a candidate's golden values moved against the current baseline's (the recalibration review)."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.calibration.golden_shifts import golden_shifts
from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.trace import Trace

CANDIDATE = Baseline("b", Path("b.yaml"), (CheckSpec("m", "absolute", "<", 1.0),),
                     golden_table=MappingProxyType({"m": MappingProxyType({1: 1.0, 2: 2.0, 3: 3.0})}))


def test_golden_shifts_against_the_current_baseline():
    old = Trace("old", MappingProxyType({"m": MappingProxyType({0: 5.0, 1: 1.5, 2: 1.0})}))
    (shift,) = golden_shifts(old, CANDIDATE)
    assert (shift.common_steps, shift.added_steps, shift.removed_steps) == (2, 1, 1)
    assert (shift.max_shift, shift.max_shift_step) == (1.0, 2)
    assert shift.mean_shift == pytest.approx(0.25)
    (fresh,) = golden_shifts(None, CANDIDATE)
    assert (fresh.common_steps, fresh.added_steps, fresh.max_shift) == (0, 3, None)
