"""A gate with nothing to compare against never passes: uncalibrated gates are ERROR, and a value that
is not a number is named as such rather than reported missing."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.model import ERROR, INFO, PASS
from autotest.readers.reading import read_trace
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare


def baseline(table: dict, *checks: CheckSpec) -> Baseline:
    return Baseline(name="b", path=Path("b.yaml"), checks=checks,
                    golden_table=MappingProxyType({m: MappingProxyType(v) for m, v in table.items()}))


def current(series: dict) -> Trace:
    steps = sorted({s for v in series.values() for s in v})
    return Trace("cur.jsonl", MappingProxyType(series), tuple(steps), ())


GATE = CheckSpec("reward", "absolute", "<", 0.1, scope="points", points=(5, 10))
ZEROED = current({"reward": {5: 0.0, 10: 0.0}})


@pytest.mark.parametrize("table", [{}, {"reward": {}}, {"reward": {1: 0.5}}], ids=["empty", "no-steps", "other-steps"])
def test_a_gate_without_golden_values_makes_the_verdict_error(table: dict) -> None:
    verdict = compare(baseline(table, GATE), ZEROED).verdict
    assert verdict.status == ERROR
    (result,) = verdict.results
    assert result.message.startswith("uncalibrated gate: reward has no golden value")
    assert result.message.endswith("run rl-autotest calibrate for this case (or declare the check severity: reference)")


def test_points_absent_on_both_sides_are_not_skipped() -> None:
    # step 10 is in neither the golden table nor the run: the gate checks less than it declares
    verdict = compare(baseline({"reward": {5: 0.5}}, GATE), current({"reward": {5: 0.52}})).verdict
    assert verdict.status == ERROR
    assert verdict.results[0].message.startswith("uncalibrated gate: reward has no golden value at steps 10;")


def test_an_uncalibrated_reference_check_only_informs() -> None:
    gate = CheckSpec("loss", "absolute", "<", 0.1)
    reference = CheckSpec("reward", "absolute", "<", 0.1, severity="reference")
    verdict = compare(baseline({"loss": {1: 1.0}}, gate, reference),
                      current({"loss": {1: 1.0}, "reward": {1: 0.0}})).verdict
    assert verdict.status == PASS
    assert verdict.results[1].status == INFO and verdict.results[1].message.startswith("uncalibrated: reward has")


@pytest.mark.parametrize("first", ["1.0", None], ids=["at-one-step", "at-every-step"])
@pytest.mark.parametrize("value, kind", [("[0.5]", "a list"), ('{"a": 1}', "a dict"), ("true", "a bool"),
                                         ('"0.5"', "a string")])
def test_a_metric_logged_as_a_non_number_is_named(tmp_path: Path, value: str, kind: str, first: str | None) -> None:
    # logged as a non-number at every step, it is there as the wrong kind: not "not in the log — map it in
    # metric_aliases"
    path = tmp_path / "tracker.jsonl"
    path.write_text(f'{{"step": 1, "loss": {first or value}}}\n{{"step": 2, "loss": {value}}}\n', encoding="utf-8")
    b = baseline({"loss": {1: 1.0, 2: 1.0}}, CheckSpec("loss", "absolute", "<", 0.1))
    verdict = compare(b, read_trace(path, metrics={"loss"})).verdict
    assert verdict.status == ERROR
    messages = [r.message for r in verdict.results if r.status == ERROR]
    assert messages[0] == (f"loss is logged as {kind}, not a number ({path}, line {2 if first else 1}); "
                           "log it as a number"), messages
    assert not any("not in the log" in m or "metric_aliases" in m for m in messages), messages


def test_a_negative_step_is_named(tmp_path: Path) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_text('{"step": 0, "loss": 1.0}\n{"step": -3, "loss": 1.0}\n', encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{path}:2: step -3 is negative; steps count from 0$"):
        read_trace(path)


@pytest.mark.parametrize("step, shown", [("1e400", "inf"), ("NaN", "nan"), ("-Infinity", "-inf")])
def test_a_non_finite_step_is_one_line(tmp_path: Path, step: str, shown: str) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_text(f'{{"step": {step}, "loss": 1.0}}\n', encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{path}:1: key 'step' is not a whole number \(a number: {shown}\); "):
        read_trace(path)


@pytest.mark.parametrize("row, key", [('{"step": 1, "loss": 1.0, "loss": 2.0}', "loss"),
                                      ('{"step": 1, "step": 2, "loss": 1.0}', "step"),
                                      ('{"step": 1, "data": {"a": 1, "a": 2}}', "a"),
                                      ('{"step": 1, "loss" : 1.0, "loss"  :  2.0}', "loss")])
def test_duplicate_keys_in_one_row_are_an_error(tmp_path: Path, row: str, key: str) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_text('{"step": 0, "loss": 1.0}\n' + row + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{path}:2: key '{key}' appears twice in one row"):
        read_trace(path)


def test_colons_inside_string_values_are_not_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_text('{"step": 1, "note": "a\\": b\\": c", "loss": 1.0}\n', encoding="utf-8")
    assert dict(read_trace(path).series["loss"]) == {1: 1.0}

