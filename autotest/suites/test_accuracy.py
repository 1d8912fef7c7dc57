"""The accuracy suites: one test per case, selected by marker (`pytest -m grpo`, `pytest -m mopd`).

Embedded cases run anywhere; GPU cases skip with their reason unless the node has the GPUs and
the framework checkout (`--strict-cases` turns those skips into failures).
"""

from __future__ import annotations

import pytest

from autotest.inputs.case import list_cases
from autotest.plugin import assert_case_outcome


def _params():
    for case in list_cases():
        if "calibration" in case.markers:
            continue
        yield pytest.param(case, id=case.name, marks=[getattr(pytest.mark, m) for m in case.markers])


@pytest.mark.parametrize("case", list(_params()))
def test_case_accuracy(case, run_accuracy_case, request):
    run = run_accuracy_case(case)
    assert_case_outcome(run, strict=request.config.getoption("--strict-cases"))
