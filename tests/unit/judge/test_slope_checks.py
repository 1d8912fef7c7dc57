"""Scope slope (the leak check): segments, splits at resume points and restarts, bad values, what it reports."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import Baseline, CheckSpec
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ERROR, FAIL, INFO, PASS
from autotest.readers.reading import read_trace
from autotest.scopes.slope import split_steps, within_slope
from autotest.judge.trace import Trace
from tests.helpers import write_tracker

M = "memory/rss_mb"
STEPS = range(1, 46)


def trace(series: dict[int, float], restarts: tuple[int, ...] = ()) -> Trace:
    return Trace("cur.jsonl", MappingProxyType({M: MappingProxyType(dict(series))}), tuple(sorted(series)),
                 restarts=restarts)


def flat(level: float = 420.0, wobble: float = 2.0) -> dict[int, float]:
    """A healthy memory curve: a level with a deterministic wobble of +-wobble MiB, no growth."""
    return {s: level + wobble * math.sin(1.7 * s) for s in STEPS}


def leak(mb_per_step: float, start: int = 1, base: dict[int, float] | None = None) -> dict[int, float]:
    base = base or flat()
    return {s: v + mb_per_step * max(0, s - start) for s, v in base.items()}


def spec(**kw) -> CheckSpec:
    kw.setdefault("metric", M)
    kw.setdefault("method", "slowdown")
    kw.setdefault("operator", "<")
    kw.setdefault("threshold", 0.5)
    return CheckSpec(scope="slope", **kw)


def run(golden: dict[int, float], current: Trace | dict[int, float], table: bool = True, **kw):
    check = spec(**kw)
    base = Baseline(name="b", path=Path("b.yaml"), checks=(check,), golden_table={M: golden} if table else {})
    cur = current if isinstance(current, Trace) else trace(current)
    return evaluate_check(check, base, trace(golden), cur, True)


def test_split_steps_starts_a_segment_at_each_split_even_between_checked_steps():
    assert split_steps([1, 2, 3, 4, 5, 6], []) == [(1, 2, 3, 4, 5, 6)]
    assert split_steps([1, 2, 3, 4, 5, 6], [4]) == [(1, 2, 3), (4, 5, 6)]
    assert split_steps([1, 2, 3, 5, 6], [4, 4, 1]) == [(1, 2, 3), (5, 6)]  # 4 is not logged: 5 starts it
    assert split_steps([2, 4, 6], [10]) == [(2, 4, 6)]


def test_within_slope_fits_one_slope_with_an_intercept_per_segment():
    # two parts that both grow 2/step, the second restarting from a low level: one line would see shrinkage
    values = {s: 2.0 * s for s in range(1, 11)} | {s: 2.0 * (s - 10) for s in range(11, 21)}
    assert within_slope([range(1, 21)], values).slope < 0.5
    fit = within_slope(split_steps(list(range(1, 21)), [11]), values)
    assert fit.slope == pytest.approx(2.0) and fit.per_segment == pytest.approx((2.0, 2.0))
    assert fit.segments == ((1, 10), (11, 20))
    single = within_slope([(1,), (2,)], {1: 1.0, 2: 5.0})
    assert not single.fitted and all(math.isnan(s) for s in single.per_segment)


def test_a_flat_run_passes_and_a_leak_fails_with_its_growth_per_step():
    healthy = run(flat(), flat(wobble=3.0))
    assert healthy.status == PASS and healthy.observed < 0.5
    leaking = run(flat(), leak(4.0))
    assert leaking.status == FAIL
    assert leaking.observed == pytest.approx(4.0, abs=0.1)
    assert "grows +4" in leaking.message and "not < 0.5" in leaking.message
    assert "growth above golden's" in leaking.message
    assert leaking.check_id == f"{M}[slope]" and leaking.worst_step == 45 and leaking.first_breach_step == 1


def test_growth_the_golden_shares_is_no_excess():
    warm = leak(1.0)  # the golden itself grows 1/step (say, a cache filling)
    assert run(warm, warm).status == PASS
    assert run(warm, leak(1.2)).status == PASS  # 0.2/step above golden's
    assert run(warm, leak(2.0)).status == FAIL


def test_slowdown_is_one_sided_absolute_is_not():
    shrinking = leak(-2.0)
    assert run(flat(), shrinking).status == PASS
    assert run(flat(), shrinking, method="absolute").status == FAIL
    assert run(flat(), shrinking, method="absolute").observed == pytest.approx(2.0, abs=0.1)


def test_method_value_bounds_the_growth_itself_without_golden():
    result = run({}, leak(2.0), table=False, method="value", threshold=1.0)
    assert result.status == FAIL and result.observed == pytest.approx(2.0, abs=0.1)
    assert "vs golden" not in result.message


def test_a_resume_hidden_by_one_line_is_split_at_the_declared_step():
    # a leak of 3/step in both parts; the resumed process (from step 21) starts low again
    resumed = {s: (flat()[s] + 3.0 * (s - 1) if s <= 20 else flat()[s] + 3.0 * (s - 21)) for s in STEPS}
    unsplit = run(flat(), resumed)
    split = run(flat(), resumed, split_at=(21,))
    assert unsplit.observed < 1.5  # the drop at the resume halves the fitted growth
    assert split.status == FAIL and split.observed == pytest.approx(3.0, abs=0.1)
    assert split.parameters["split_at"] == [21] and split.parameters["segments"] == [[1, 20], [21, 45]]
    assert "2 segments split at steps 21" in split.message


def test_the_reader_records_where_the_step_counter_went_back(tmp_path):
    # a resumed run re-did steps 19-20 (the same values: a re-log), then went on
    rows = [{"step": s, "loss": float(s)} for s in (*range(1, 21), *range(19, 46))]
    path = tmp_path / "tracker.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    current = read_trace(path, fmt="xtuner")
    assert current.restarts == (19,)
    assert current.with_aliases({"l": "loss"}).restarts == (19,)
    assert read_trace(write_tracker(tmp_path / "plain" / "tracker.jsonl", {1: {"loss": 1.0}, 2: {"loss": 2.0}}),
                      fmt="xtuner").restarts == ()


def test_a_restart_in_the_log_splits_the_fit_like_a_declared_one():
    resumed = {s: 400.0 + 3.0 * s for s in range(1, 19)} | {s: 400.0 + 3.0 * (s - 19) for s in range(19, 46)}
    golden = {s: 400.0 for s in STEPS}
    assert run(golden, trace(resumed)).observed < 1.5
    result = run(golden, trace(resumed, restarts=(19,)))
    assert result.status == FAIL and result.observed == pytest.approx(3.0, abs=1e-9)
    assert result.parameters["segments"] == [[1, 18], [19, 45]]
    assert run(golden, trace(resumed, restarts=(19,)), split_at=(19,)).parameters["split_at"] == [19]


def test_non_finite_current_fails_and_non_finite_golden_is_an_error():
    broken_run = flat() | {30: math.nan}
    result = run(flat(), broken_run)
    assert result.status == FAIL and math.isnan(result.observed) and result.first_breach_step == 30
    broken_golden = flat() | {12: math.inf}
    result = run(broken_golden, flat())
    assert result.status == ERROR and "non-finite golden values at steps 12" in result.message


def test_missing_metric_missing_steps_and_too_few_steps_are_errors():
    check = spec()
    base = Baseline(name="b", path=Path("b.yaml"), checks=(check,), golden_table={M: flat()})
    other = Trace("cur.jsonl", MappingProxyType({"x": MappingProxyType({1: 1.0})}), (1,))
    missing = evaluate_check(check, base, trace(flat()), other, True)
    assert missing.status == ERROR and "missing from the current run" in missing.message
    short = {s: v for s, v in flat().items() if s <= 30}
    result = run(flat(), short)
    assert result.status == ERROR and "lacks steps 31, 32" in result.message
    one_each = run({1: 400.0, 2: 401.0}, {1: 400.0, 2: 450.0}, split_at=(2,))
    assert one_each.status == ERROR and "no segment has two steps or more" in one_each.message


def test_uncalibrated_and_reference_slope_checks():
    base = Baseline(name="b", path=Path("b.yaml"), checks=(spec(),), golden_table={})
    no_golden = Trace("b.yaml (golden table)", MappingProxyType({}), ())
    result = evaluate_check(spec(), base, no_golden, trace(leak(4.0)), True)
    assert result.status == ERROR and "uncalibrated gate" in result.message
    reference = run(flat(), leak(4.0), severity="reference")
    assert reference.status == INFO and reference.message.startswith("reference only, outside threshold")


def test_window_limits_the_fit_and_names_the_check():
    late = leak(4.0, start=30)
    assert run(flat(), late, window=(1, 25)).status == PASS
    windowed = run(flat(), late, window=(30, 45))
    assert windowed.status == FAIL and windowed.check_id == f"{M}[slope 30-45]"


def test_slope_checks_read_and_write_back(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text(f"""golden: {{table: {{{M}: {{1: 400.0, 2: 401.0, 3: 402.0}}}}}}
checks:
  - {{metric: {M}, method: slowdown, operator: "<", threshold: 0.25, scope: slope, split_at: [21, 3, 21]}}
""", encoding="utf-8")
    loaded = load_baseline(path)
    check = loaded.checks[0]
    assert check.scope == "slope" and check.split_at == (3, 21)
    assert "least-squares growth per step" in check.describe() and "split at steps 3/21" in check.describe()
    again = tmp_path / "again.yaml"
    again.write_text(baseline_yaml(loaded), encoding="utf-8")
    assert load_baseline(again).checks == loaded.checks
    assert "split_at: [3, 21]" in again.read_text(encoding="utf-8")
    assert replace(check, split_at=()).describe().endswith("(within segments)")
