"""init's proposals: a role per metric, placeholder checks on each gated role's headline metric."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autotest.calibration.proposals import baseline_spec, propose, thirds
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.trace import Trace

STEPS = range(1, 11)


def _trace(series: dict[str, dict[int, float]]) -> Trace:
    return Trace(source="t.jsonl", series=series, train_steps=tuple(STEPS))


def _ramp(scale: float = 1.0) -> dict[int, float]:
    return {s: scale * s / 10 for s in STEPS}


TRL = _trace({"reward": _ramp(), "rewards/correct_digit/mean": _ramp(), "completions/mean_length": _ramp(2),
              "completions/max_length": {s: 2.0 for s in STEPS}, "entropy": _ramp(3), "loss": _ramp(),
              "step_time": _ramp(0.1), "num_tokens": _ramp(100)})


def test_trl_log_gets_roles_from_the_inferred_preset_and_placeholder_checks_per_role() -> None:
    proposal = propose(TRL)
    assert proposal.preset == "trl"
    rows = {r.metric: r for r in proposal.rows}
    thirds = ("pooled 1-3", "pooled 4-7", "pooled 8-10")  # ten steps: the early, middle and late windows
    assert rows["reward"].checks == ("reward[percentile]", *(f"reward[{w}]" for w in thirds), "reward[pooled]")
    assert rows["completions/mean_length"].checks == ("completions/mean_length[percentile]",
                                                      *(f"completions/mean_length[{w}]" for w in thirds))
    assert rows["entropy"].checks == ("entropy[points]", *(f"entropy[{w}]" for w in thirds))
    assert rows["rewards/correct_digit/mean"].note == "reward is this role's checked metric"
    assert rows["completions/max_length"].note.startswith("constant in this run")
    assert rows["loss"].role == "loss" and "not gated by default" in rows["loss"].note
    assert rows["num_tokens"].role is None and rows["num_tokens"].checks == ()
    assert all(c.placeholder and math.isnan(c.threshold) for c in proposal.checks)
    entropy = next(c for c in proposal.checks if c.metric == "entropy")
    assert entropy.scope == "points" and entropy.points == (1,)
    time = next(c for c in proposal.checks if c.metric == "step_time")
    assert time.severity == "reference" and time.method == "slowdown"
    assert proposal.expected_steps == 10


def test_every_learning_curve_role_gets_pooled_gates_and_level_roles_keep_their_level_checks() -> None:
    # a per-step check fires only past the seeds' worst step; the pooled mean sees a small shift at every step,
    # per window (early, middle, late) so a change acting in one third is not diluted by the other two
    proposal = propose(_trace({"response/rewards/mean": _ramp(), "response/response_len/mean": _ramp(50),
                               "entropy/mean": _ramp(3), "eval/accuracy": {0: 0.1, 5: 0.4, 10: 0.7},
                               "mismatch/mismatch_k3_kl": _ramp(1e-3)}))
    checks = {c.check_id: (c.method, c.severity) for c in proposal.checks}
    windows = ("1-3", "4-7", "8-10")
    assert checks == {
        "response/rewards/mean[percentile]": ("absolute", "gate"),
        **{f"response/rewards/mean[pooled {w}]": ("absolute", "gate") for w in windows},
        "response/rewards/mean[pooled]": ("absolute", "gate"),  # the headline keeps the whole run: a change everywhere
        "response/response_len/mean[percentile]": ("relative", "gate"),
        **{f"response/response_len/mean[pooled {w}]": ("absolute", "gate") for w in windows},
        "entropy/mean[points]": ("absolute", "gate"),
        **{f"entropy/mean[pooled {w}]": ("absolute", "gate") for w in windows},
        # three eval points cannot make three windows of three: one gate over them all
        "eval/accuracy[final]": ("absolute", "gate"), "eval/accuracy[pooled]": ("absolute", "gate"),
        "mismatch/mismatch_k3_kl[percentile]": ("absolute", "gate"),
        # a fault on alternate steps leaves the median clean: every step is bounded too (xtuner's value form)
        "mismatch/mismatch_k3_kl[breaches]": ("value", "gate")}


def test_xtuner_log_takes_the_mean_series_as_the_headline_of_a_role() -> None:
    proposal = propose(_trace({"response/rewards/max": _ramp(), "response/rewards/mean": _ramp(),
                               "response/rewards/min": _ramp(), "time/step": _ramp(), "time/generate": _ramp()}))
    assert proposal.preset == "xtuner"
    checked = {c.metric for c in proposal.checks}
    assert checked == {"response/rewards/mean", "time/step"}


def test_the_spec_written_reads_back_with_its_placeholders(tmp_path: Path) -> None:
    path = tmp_path / "trl-grpo.yaml"
    spec = baseline_spec("trl-grpo", path, propose(TRL), {"produced_by": "rl-autotest init"})
    path.write_text(baseline_yaml(spec))
    loaded = load_baseline(path)
    assert "threshold: placeholder" in path.read_text()
    assert [c.check_id for c in loaded.checks] == [c.check_id for c in spec.checks]
    assert all(c.placeholder for c in loaded.checks)
    assert loaded.preset == "trl" and loaded.steps.expected == 10 and dict(loaded.golden_table or {}) == {}


def test_a_threshold_that_is_neither_a_number_nor_placeholder_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("golden: {table: {}}\nchecks:\n- {metric: reward, method: absolute, operator: <, "
                    "threshold: TODO}\n")
    with pytest.raises(UsageError) as err:
        load_baseline(path)
    assert str(err.value) == (f"{path}: checks[0].threshold: 'TODO' is not a number; write a number, e.g. 0.05 "
                              "(unquoted), or placeholder until rl-autotest calibrate sets it")


def test_memory_gets_a_peak_gate_and_a_leak_gate_on_its_peak_metric() -> None:
    proposal = propose(_trace({"response/rewards/mean": _ramp(), "memory/rss_mb": _ramp(400),
                               "memory/peak_rss_mb": _ramp(410)}))
    memory = [c for c in proposal.checks if c.metric.startswith("memory/")]
    assert [(c.metric, c.method, c.scope, c.severity) for c in memory] == [
        ("memory/peak_rss_mb", "relative", "final", "gate"), ("memory/peak_rss_mb", "slowdown", "slope", "gate")]
    rows = {r.metric: r for r in proposal.rows}
    assert rows["memory/rss_mb"].note == "memory/peak_rss_mb is this role's checked metric"
    verl = propose(_trace({"critic/score/mean": _ramp(), "perf/cpu_memory_used_gb": _ramp(9),
                           "perf/max_memory_allocated_gb": _ramp(20), "perf/max_memory_reserved_gb": _ramp(25)}))
    assert {c.metric for c in verl.checks if c.scope == "slope"} == {"perf/max_memory_allocated_gb"}


def test_the_memory_proposal_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    trace = _trace({"response/rewards/mean": _ramp(), "memory/peak_rss_mb": _ramp(410)})
    path.write_text(baseline_yaml(baseline_spec("b", path, propose(trace), {})))
    loaded = load_baseline(path)
    assert {c.check_id for c in loaded.checks if c.placeholder} >= {"memory/peak_rss_mb[final]",
                                                                     "memory/peak_rss_mb[slope]"}


def test_the_framework_specs_checks_replace_what_init_proposed_on_their_metrics(tmp_path):
    from autotest.calibration.proposals import with_spec_checks
    from autotest.inputs.framework_spec import SpecCheck
    from autotest.inputs.framework_spec_checks import as_check

    proposal = propose(_trace({"response/rewards/mean": _ramp(), "mismatch/mismatch_k3_kl": _ramp(1e-4)}), "xtuner")
    where = "autotest/config.yaml@abc"
    spec = (as_check(SpecCheck("mismatch/mismatch_k3_kl", "value", "<", 0.001), where),
            as_check(SpecCheck("time/step", "absolute", "<", 15.0), where))
    imported = with_spec_checks(proposal, spec, where)
    k3 = [c for c in imported.checks if c.metric == "mismatch/mismatch_k3_kl"]
    assert [(c.method, c.threshold, c.placeholder) for c in k3] == [("value", 0.001, False)]
    assert any(c.metric == "response/rewards/mean" and c.placeholder for c in imported.checks)  # init's own stay
    rows = {r.metric: r for r in imported.rows}
    assert rows["mismatch/mismatch_k3_kl"].checks == ("mismatch/mismatch_k3_kl[stepwise]",)
    assert rows["time/step"].note == f"checked by the framework's spec {where}; not in this log"
    path = tmp_path / "b.yaml"  # what init writes reads back, the spec's thresholds as numbers
    path.write_text(baseline_yaml(baseline_spec("c", path, imported, {"produced_by": "rl-autotest init"})))
    assert {c.metric: c.threshold for c in load_baseline(path).checks if not c.placeholder} == \
        {"mismatch/mismatch_k3_kl": 0.001, "time/step": 15.0}


@pytest.mark.parametrize("steps, windows", [
    (range(1, 46), ((1, 15), (16, 30), (31, 45))),  # the embedded cases' windows
    (range(1, 31), ((1, 10), (11, 20), (21, 30))),
    (range(0, 50, 5), ((0, 10), (15, 30), (35, 45))),  # eval points: windows of the logged steps, not of 0-45
    (range(1, 10), ((1, 3), (4, 6), (7, 9))),
    (range(1, 9), ()),  # a window of two steps would say little: one whole-run gate instead
])
def test_thirds_split_the_logged_steps_into_early_middle_and_late(steps: range, windows: tuple) -> None:
    assert thirds(list(steps)) == windows


def test_a_windowed_proposal_keeps_the_placeholder_contract_and_says_which_third(tmp_path: Path) -> None:
    proposal = propose(_trace({"reward": {s: s / 30 for s in range(1, 31)}}))
    pooled = [c for c in proposal.checks if c.scope == "pooled"]
    assert [c.window for c in pooled] == [(1, 10), (11, 20), (21, 30), None]
    assert all(c.placeholder and math.isnan(c.threshold) for c in pooled)
    assert [c.derivation.split("; ")[-1].split(" third")[0] for c in pooled[:3]] == ["the early", "the middle",
                                                                                     "the late"]
    path = tmp_path / "b.yaml"
    path.write_text(baseline_yaml(baseline_spec("b", path, proposal, {"produced_by": "rl-autotest init"})))
    assert [c.window for c in load_baseline(path).checks if c.scope == "pooled"] == [(1, 10), (11, 20), (21, 30),
                                                                                    None]


def test_a_log_too_short_for_windows_gets_one_whole_run_gate_per_role() -> None:
    short = _trace({"reward": {s: s / 8 for s in range(1, 9)}, "entropy": {s: 3 - s / 8 for s in range(1, 9)}})
    assert sorted(c.check_id for c in propose(short).checks) == [
        "entropy[points]", "entropy[pooled]", "reward[percentile]", "reward[pooled]"]
