"""A case's performance section: defaults, every key, and one pinned line for each bad value."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.performance_policy import ContentionBudget, PerformancePolicy
from tests.unit.inputs.test_case import write_case


def test_a_case_without_the_section_gets_blocking_contention_normalised_gates(tmp_path):
    assert load_case(write_case(tmp_path)).performance == PerformancePolicy()


def test_every_key_is_read(tmp_path):
    extra = ("performance:\n  blocking: false\n  normalise: raw\n  contention_budget:\n    run_delay_share: 0.3\n"
             "    steal_share: 0\n    probe_wait_ratio: 2\n    gpu_other_processes: 1\n    gpu_throttle: false\n")
    policy = load_case(write_case(tmp_path, extra=extra)).performance
    assert policy == PerformancePolicy(blocking=False, normalise="raw", budget=ContentionBudget(0.3, 0.0, 2.0, 1, False))


@pytest.mark.parametrize("section,expected", [
    ("performance: {blocking: maybe}", "performance.blocking: 'maybe' is not true or false; write true or false"),
    ("performance: {normalise: probe}", "performance.normalise: 'probe' is not one of contention, raw; write one of "
                                        "contention, raw (quote it)"),
    ("performance: {blockng: false}", "performance.blockng: unknown key; did you mean 'blocking'?"),
    ("performance: {contention_budget: {run_delay_share: 1.5}}",
     "performance.contention_budget.run_delay_share: 1.5 is above 1; write a share between 0 and 1"),
    ("performance: {contention_budget: {steal_share: -0.1}}",
     "performance.contention_budget.steal_share: -0.1 is below 0; write a share between 0 and 1"),
    ("performance: {contention_budget: {probe_wait_ratio: 0.5}}",
     "performance.contention_budget.probe_wait_ratio: 0.5 is below 1; write a ratio >= 1 (1.5 allows a 50% wait)"),
    ("performance: {contention_budget: {gpu_other_processes: -1}}",
     "performance.contention_budget.gpu_other_processes: -1 is below 0; write how many other processes may share "
     "the case's GPUs"),
])
def test_a_bad_value_is_one_line_naming_the_key(tmp_path, section, expected):
    path = write_case(tmp_path, extra=section + "\n")
    with pytest.raises(UsageError) as info:
        load_case(path)
    assert str(info.value) == f"{path}: {expected}"
