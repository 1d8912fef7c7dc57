"""Power by run length: which gates a prefix of the run judges, and at what MDE (autotest.judge.power_steps)."""

from __future__ import annotations

import pytest

from autotest.inputs.baseline import CheckSpec, load_baseline
from autotest.judge.power_steps import (
    NO_MDE,
    NOT_JUDGED,
    best_mde,
    full_run,
    given_up,
    judged_from,
    prefix_gates,
    prefix_rows,
    table_steps,
    targets_at,
)
from tests.helpers import ROOT

STEPS = list(range(1, 46))


def _check(scope: str, **fields) -> CheckSpec:
    return CheckSpec("response/rewards/mean", "absolute", "<", 1.0, scope=scope, **fields)


@pytest.mark.parametrize("check, first", [
    (_check("stepwise"), 1),
    (_check("pooled", window=(16, 30)), 30),
    (_check("pooled", window=(31, 60)), 45),  # a window past the run's end: its last logged step
    (_check("window", window=(50, 60)), None),  # nothing it reads is in the run
    (_check("points", points=(1,)), 1),
    (_check("points", points=(5, 20)), 5),  # each point is judged on its own, from the first
    (_check("final"), 45),
    (_check("percentile", percentile=80), 45),
    (_check("breaches"), 45),
])
def test_a_gate_is_judged_once_the_prefix_holds_every_step_it_reads(check: CheckSpec, first: int | None) -> None:
    assert judged_from(check, STEPS, 45) == first


def test_a_bound_on_a_metric_without_golden_is_judged_at_the_steps_it_declares() -> None:
    assert judged_from(_check("points", points=(1, 25)), [], 25) == 1
    assert judged_from(_check("points", points=(30,)), [], 25) is None
    assert judged_from(_check("stepwise"), [], 25) == 1
    assert judged_from(_check("final"), [], 25) == 25


@pytest.fixture(scope="module")
def grpo():
    baseline = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml")
    return baseline, prefix_gates(baseline)


def test_a_pooled_window_beyond_the_prefix_is_not_judged_and_judged_at_its_end(grpo) -> None:
    _, gates = grpo
    late = next(g for g in gates if g.check_id == "response/rewards/mean[pooled 31-45]")
    assert [late.cell(s) for s in (25, 44)] == [NOT_JUDGED, NOT_JUDGED]
    # tiny-grpo's late reward window: threshold 3.0 in noise units over steps whose noise is about 0.02
    assert late.cell(45).startswith("±0.086")
    bound = next(g for g in gates if g.check_id == "mismatch/mismatch_k3_kl[stepwise]")
    assert bound.cell(1) == NO_MDE


def test_each_metric_s_best_mde_is_non_increasing_in_run_length(grpo) -> None:
    _, gates = grpo
    previous: dict[str, float] = {}
    for steps in range(0, 46):
        best = best_mde(gates, steps)
        assert set(previous) <= set(best), steps  # a longer run never judges fewer metrics
        for metric, (value, _) in best.items():
            assert value <= previous.get(metric, float("inf")), (metric, steps)
        previous = {m: v for m, (v, _) in best.items()}
    assert previous["response/rewards/mean"] == pytest.approx(0.021, abs=5e-4)  # pooled 1-15, the narrowest


def test_the_table_has_a_row_where_another_gate_becomes_judgeable(grpo) -> None:
    baseline, gates = grpo
    full = full_run(baseline)
    assert full == 45 and table_steps(gates, full) == [1, 15, 30, 45]
    rows = prefix_rows(gates, [15], full)
    assert rows[0].startswith("| steps | `response/rewards/mean[percentile]`")
    cells = rows[2].strip("| ").split(" | ")
    assert cells[0] == "15 of 45" and len(cells) == len(gates) + 1
    assert cells.count(NOT_JUDGED) == sum(1 for g in gates if not g.judged_at(15)) == 12


def test_what_a_prefix_gives_up_names_each_gate_it_does_not_judge(grpo) -> None:
    _, gates = grpo
    lines = given_up(gates, 30, 45)
    assert "response/rewards/mean[pooled 31-45] not judged" in lines
    assert not any("pooled 1-15" in line or "pooled 16-30" in line for line in lines)
    assert "eval/accuracy: no gate judged (the full run's best ±0.098)" in lines
    assert "mismatch/mismatch_k3_kl: only its bounds judged (the full run's best ±1.5e-11)" in lines
    assert given_up(gates, 45, 45) == []


def test_a_detect_target_is_reached_from_the_first_prefix_whose_gates_reach_it(grpo) -> None:
    _, gates = grpo
    targets = {"response/rewards/mean": 0.05}
    assert targets_at(gates, 14, targets)  # no reward gate judged yet
    assert targets_at(gates, 15, targets) == []  # pooled 1-15: ±0.021
    assert len(targets_at(gates, 44, {"eval/accuracy": 0.2})) == 1
    assert targets_at(gates, 45, {"eval/accuracy": 0.2}) == []


@pytest.fixture(scope="module")
def mopd():
    baseline = load_baseline(ROOT / "baselines" / "tiny-mopd.yaml")
    return baseline, prefix_gates(baseline)


def test_a_points_gate_in_a_prefix_judges_the_points_it_holds_at_the_full_run_s_mde(mopd) -> None:
    """tiny-mopd's points gates read steps 0-25 every 5 steps: a 15-step prefix judges 0/5/10/15 of them."""
    baseline, gates = mopd
    kl = next(g for g in gates if g.check_id == "distillation/reduced_distillation_kl[points]")
    assert kl.points == (1, 5, 10, 15, 20, 25) and kl.judged_from == 1
    assert kl.points_beyond(15) == (20, 25) and kl.points_beyond(25) == ()
    assert kl.cell(15) == f"{kl.cell(25)}, 4 of 6 points" and kl.cell(0) == NOT_JUDGED
    assert table_steps(gates, 25) == [0, 1, 5, 10, 15, 20, 25]
    lines = given_up(gates, 15, 25)
    assert "distillation/reduced_distillation_kl[points] at steps 20/25 not judged" in lines
    assert "eval/digit_sum/acc[points] at steps 20/25 not judged" in lines
    assert "distillation/teacher_probe/digit_sum_teacher[points] at step 25 not judged" in lines
    assert "response/rewards/mean[pooled 1-25] not judged" in lines
    # the pooled gates are the narrowest: without them a metric's best MDE is its points gate's
    assert "distillation/reduced_distillation_kl ±0.67 instead of ±0.11" in lines
