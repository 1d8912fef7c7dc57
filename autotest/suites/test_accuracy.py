"""The accuracy suites: one test per case, selected by marker (`pytest -m grpo`, `pytest -m mopd`).

Embedded cases run anywhere; GPU cases skip with their reason unless the node has the GPUs and
the framework checkout (`--strict-cases` turns those skips into failures).
"""

from __future__ import annotations

import pytest

from autotest.plugin import (
    assert_ab_outcome,
    assert_case_outcome,
    environment_fallback_of,
    run_ab_case,
    selected_cases,
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per case: the project's cases (plus the packaged demo with --packaged-cases), else the demo."""
    metafunc.parametrize("case", [
        pytest.param(case, id=case.name, marks=[getattr(pytest.mark, m) for m in case.markers])
        for case in selected_cases(metafunc.config) if "calibration" not in case.markers])


def test_case_accuracy(case, run_accuracy_case, request):
    config = request.config
    if config.getoption("--ab-base"):  # the paired gate instead of the golden one
        assert_ab_outcome(run_ab_case(config, case))
        return
    fallback = environment_fallback_of(config, case) if config.getoption("--ab-if-environment-changed") else None
    if fallback is not None:  # the golden was made in another environment: A/B against the last trusted commit
        # the paired noise was measured in the old environment too: the A/A guard checks it still holds
        assert_ab_outcome(run_ab_case(config, case, base_ref=fallback.base_sha, aa_check=True),
                          preface=fallback.line())
        return
    run = run_accuracy_case(case)
    assert_case_outcome(run, strict=request.config.getoption("--strict-cases"))
