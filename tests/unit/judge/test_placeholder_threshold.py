"""A ``threshold: placeholder`` (rl-autotest init's proposal) never passes: ERROR until calibrated."""

from __future__ import annotations

import math
from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.calibration.promote import promote
from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ERROR, INFO
from autotest.judge.trace import Trace

SERIES = {"reward": {1: 0.1, 2: 0.2}}


def _baseline(check: CheckSpec, path: Path = Path("b.yaml"), provenance: dict | None = None) -> Baseline:
    return Baseline(name="b", path=path, checks=(check,), golden_table=MappingProxyType(SERIES),
                    provenance=MappingProxyType(provenance or {}))


def _placeholder(severity: str = "gate") -> CheckSpec:
    return CheckSpec(metric="reward", method="absolute", operator="<", threshold=math.nan, scope="percentile",
                     percentile=80.0, severity=severity, placeholder=True)


def test_a_placeholder_gate_is_an_error_naming_the_next_command_even_when_the_run_equals_golden() -> None:
    trace = Trace(source="t.jsonl", series=SERIES, train_steps=(1, 2))
    check = _placeholder()
    result = evaluate_check(check, _baseline(check), trace, trace, golden_is_table=True)
    assert result.status == ERROR
    assert result.message == ("reward: threshold is a placeholder (written by rl-autotest init, not measured); run "
                              "rl-autotest calibrate for this case, then rl-autotest baseline promote")
    assert result.threshold is None


def test_a_placeholder_reference_check_only_informs() -> None:
    trace = Trace(source="t.jsonl", series=SERIES, train_steps=(1, 2))
    check = _placeholder("reference")
    assert evaluate_check(check, _baseline(check), trace, trace, golden_is_table=True).status == INFO


def test_describe_shows_placeholder_not_nan() -> None:
    assert _placeholder().describe() == "reward: absolute < placeholder, p80 of per-step errors"


def test_promote_refuses_a_candidate_that_still_has_a_placeholder_even_with_force(tmp_path: Path) -> None:
    target = tmp_path / "b.yaml"
    candidate = tmp_path / "b.candidate.yaml"
    candidate.write_text(baseline_yaml(_baseline(_placeholder(), candidate,
                                                 {"produced_by": "rl-autotest calibrate"})))
    with pytest.raises(UsageError) as err:
        promote(target, force="reviewed")
    assert str(err.value) == (
        f"{candidate}: not promoted: checks: threshold still a placeholder for reward[percentile] (calibration "
        "could not measure it; see the candidate's derivation); fix the metric name or remove the check; "
        "fix the candidate")
    assert not target.exists()
