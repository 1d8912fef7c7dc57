"""A case's ``tiers:`` section: shorter runs of the case; each bad value is one line naming the key."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.case_tiers import Tier
from tests.unit.inputs.test_case import write_case


def test_a_case_without_the_section_has_no_tier(tmp_path):
    assert load_case(write_case(tmp_path)).tiers == {}


def test_a_tier_is_read_with_its_steps_and_args(tmp_path):
    case = load_case(write_case(tmp_path, extra='tiers:\n  pr: {steps: 2, args: [--stop-at-step, "2", "{work_dir}"]}\n'))
    assert case.tiers == {"pr": Tier("pr", 2, ("--stop-at-step", "2", "{work_dir}"))}


def test_the_embedded_cases_declare_a_pr_tier_that_stops_the_workload_early():
    assert load_case("tiny-grpo").tiers == {"pr": Tier("pr", 30, ("--stop-at-step", "30"))}
    assert load_case("tiny-mopd").tiers == {"pr": Tier("pr", 15, ("--steps", "15"))}  # a constant LR (docs/cases.md)


@pytest.mark.parametrize("section,expected", [
    ("tiers: {pr: {steps: 3, args: [--stop-at-step, '3']}}",
     "tiers.pr.steps: 3 is not shorter than the full run's 3 (expected.steps); write 1 to 2, or drop the tier"),
    ("tiers: {pr: {steps: 0, args: [x]}}", "tiers.pr.steps: 0 is below 1; write the steps it trains, 1 to 2"),
    ("tiers: {pr: {steps: 2}}", "tiers.pr.args: required key is missing; add it (see docs/cases.md)"),
    ("tiers: {pr: {steps: 2, args: []}}", "tiers.pr.args: is empty; write the arguments that stop the workload "
                                          "after its steps, e.g. ['--stop-at-step', '2']"),
    ("tiers: {pr: {steps: 2, args: ['{steps}']}}", "tiers.pr.args[0]: unknown placeholder {steps}; "),
    ("tiers: {pr: {steps: 2, args: [x], stesp: 1}}", "tiers.pr.stesp: unknown key; did you mean 'steps'?"),
    ("tiers: {'2pr': {steps: 2, args: [x]}}", "tiers.2pr: is not a tier name; name it with a word, e.g. pr"),
    ("tiers: [pr]", "tiers: ['pr'] is not a mapping; write key: value lines"),
])
def test_a_bad_value_is_one_line_naming_the_key(tmp_path, section, expected):
    path = write_case(tmp_path, extra=section + "\n")
    with pytest.raises(UsageError) as info:
        load_case(path)
    assert str(info.value).startswith(f"{path}: {expected}") and "\n" not in str(info.value)
