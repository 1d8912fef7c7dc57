"""Triage from evidence, per role: each rule on traces of its shape, judged by the real check engine."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare
from autotest.report.markdown import render_markdown

STEPS = range(1, 31)
EVALS = (0, 10, 20, 30)


def _golden(names: dict[str, str]) -> dict[str, dict[int, float]]:
    """A healthy run in ``names``' vocabulary (role -> metric name)."""
    series = {
        "reward": {s: 0.01 + 0.02 * s for s in STEPS},
        "length": {s: 40.0 - 0.5 * s for s in STEPS},
        "entropy": {s: 2.0 - 0.03 * s for s in STEPS},
        "mismatch": {s: 1e-8 for s in STEPS},
        "time": {s: 1.0 for s in STEPS},
        "eval": {s: 0.2 + 0.01 * s for s in EVALS},
    }
    return {names[k]: v for k, v in series.items() if k in names}


XTUNER = {"reward": "response/rewards/mean", "length": "response/response_len/mean", "entropy": "entropy/mean",
          "mismatch": "mismatch/mismatch_k3_kl", "time": "time/step", "eval": "eval/accuracy"}
VERL = {"reward": "critic/score/mean", "length": "response_length/mean", "entropy": "actor/entropy",
        "mismatch": "rollout_corr/k3_kl", "time": "timing_s/step", "eval": "val-core/gsm8k/acc/mean@1"}
TRL = {"reward": "reward", "length": "completions/mean_length", "entropy": "entropy", "time": "step_time",
       "eval": "eval_reward"}
THRESHOLDS = {"reward": ("absolute", 0.05), "length": ("relative", 0.1), "entropy": ("absolute", 0.1),
              "mismatch": ("absolute", 1e-4), "time": ("relative", 0.5), "eval": ("absolute", 0.05)}


def _case(tmp_path: Path, names: dict[str, str], change, extra: dict | None = None):
    golden = _golden(names)
    checks = [{"metric": names[k], "method": THRESHOLDS[k][0], "operator": "<", "threshold": THRESHOLDS[k][1]}
              for k in names]
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": golden}, "checks": checks, **(extra or {})}))
    current = {m: dict(v) for m, v in golden.items()}
    change({k: current[names[k]] for k in names})
    evals = [s for s in EVALS]
    trace = Trace("current", MappingProxyType(current), train_steps=tuple(STEPS), eval_steps=tuple(evals))
    return compare(load_baseline(path), trace).verdict


def _rules(verdict):
    return [f.rule for f in verdict.triage]


def _scale(series, factor, start=1):
    for s in series:
        if s >= start:
            series[s] *= factor


def test_rewards_doubled_with_eval_healthy_is_the_judger_not_the_training_loop(tmp_path: Path):
    # the training judge's rewards doubled for the whole run; within threshold at step 1, breached later
    verdict = _case(tmp_path, XTUNER, lambda c: _scale(c["reward"], 2.0))
    assert verdict.status == "FAIL"
    # exactly 2 x golden at every step, nothing else moved: a judger's reward scale or the logger's, told apart by
    # scoring logged responses again (issue 30, honest uncertainty)
    assert _rules(verdict) == ["rewards-only", "logging-units", "gradual"]
    primary = verdict.triage[0]
    assert primary.uncertain_with == "logging-units" and primary.next_step.startswith("rewards-only or logging-units")
    assert "to tell: score a few logged responses again" in primary.next_step
    assert "eval within bounds at every step" in primary.evidence
    assert "response_length within bounds at every step" in primary.evidence
    assert "entropy within bounds at every step" in primary.evidence
    assert verdict.triage[1].why_ranked  # the runner-up says why it ranks second


def test_the_same_shape_in_verl_names_triages_the_same(tmp_path: Path):
    verdict = _case(tmp_path, VERL, lambda c: _scale(c["reward"], 2.0))
    assert _rules(verdict)[0] == "rewards-only"
    assert "preset verl, inferred" in verdict.roles_note


def test_rewards_wrong_from_the_first_step_then_eval_is_the_judger(tmp_path: Path):
    def judge_bug(c):
        for s in c["reward"]:
            c["reward"][s] = 1.0 - c["reward"][s]
        _scale(c["eval"], 0.5, start=20)
    verdict = _case(tmp_path, XTUNER, judge_bug)
    assert _rules(verdict) == ["rewards-only"]
    assert "the run's first point" in verdict.triage[0].evidence


def test_eval_alone_is_the_eval_path(tmp_path: Path):
    verdict = _case(tmp_path, XTUNER, lambda c: _scale(c["eval"], 0.5, start=10))
    assert _rules(verdict) == ["eval-path"]


def test_entropy_at_step_one_is_initialisation(tmp_path: Path):
    def init(c):
        _scale(c["entropy"], 1.5)
        _scale(c["reward"], 3.0, start=10)
    assert _rules(_case(tmp_path, XTUNER, init)) == ["first-step"]


def test_a_changed_sampling_distribution_with_agreeing_log_probs_is_named(tmp_path: Path):
    """A rollout that samples from the top-p nucleus but reports unfiltered log-probs: k3 stays healthy, the
    sampled tokens' entropy drops (within its bound), rewards and eval rise later."""
    def top_p(c):
        for s in c["entropy"]:
            c["entropy"][s] -= 0.06  # 60% of the entropy threshold, at every step
        _scale(c["reward"], 1.5, start=12)
        _scale(c["eval"], 1.4, start=20)
    verdict = _case(tmp_path, XTUNER, top_p)
    assert _rules(verdict)[0] == "sampling-changed"
    primary = verdict.triage[0]
    assert primary.suggestion.startswith("rollout sampling changed (the distribution, not the log-probs)")
    assert "entropy of the sampled tokens moved: entropy/mean" in primary.evidence and "of it)" in primary.evidence
    assert "gradual" in _rules(verdict)


def test_scores_and_entropy_rising_together_is_a_narrower_sampler_not_the_training_loop(tmp_path: Path):
    """What the real top-p run shows: the sampler never draws the tail, so the update never pushes it down;
    the entropy of the sampled tokens rises beyond its bound while rewards and eval rise (tiny-grpo, top-p:0.7)."""
    def nucleus(c):
        for s in c["entropy"]:
            c["entropy"][s] += 0.02 * s  # falls slower than the golden's, past its bound from step ~6
        _scale(c["reward"], 1.6, start=10)
        _scale(c["eval"], 1.3, start=20)
    verdict = _case(tmp_path, XTUNER, nucleus)
    assert _rules(verdict)[0] == "sampling-changed"
    primary = verdict.triage[0]
    assert "rewards and eval rose while the entropy of the sampled tokens rose too" in primary.suggestion
    assert "scores rose above the golden (response/rewards/mean +" in primary.evidence
    assert "while entropy/mean rose too (+" in primary.evidence and "gradual" in _rules(verdict)


def test_entropy_rising_while_scores_fall_stays_the_training_loop(tmp_path: Path):
    """An entropy bonus weighed too much (entropy-scale): entropy up, rewards down; an update did it."""
    def bonus(c):
        for s in c["entropy"]:
            c["entropy"][s] += 0.02 * s
        _scale(c["reward"], 0.4, start=10)
    assert _rules(_case(tmp_path, XTUNER, bonus)) == ["gradual"]


def test_drift_after_the_start_across_roles_is_the_training_loop(tmp_path: Path):
    def loop(c):
        _scale(c["reward"], 0.3, start=12)
        _scale(c["length"], 1.5, start=12)
        _scale(c["eval"], 0.5, start=20)
    assert _rules(_case(tmp_path, XTUNER, loop)) == ["gradual"]


def test_mismatch_first(tmp_path: Path):
    def sync(c):
        for s in c["mismatch"]:
            c["mismatch"][s] = 1e-2
        _scale(c["reward"], 0.3, start=12)
    assert _rules(_case(tmp_path, XTUNER, sync))[0] == "mismatch"


def test_trl_step_time_is_performance_never_accuracy(tmp_path: Path):
    verdict = _case(tmp_path, TRL, lambda c: _scale(c["time"], 3.0))
    assert _rules(verdict) == ["performance-only"]
    both = _case(tmp_path, TRL, lambda c: (_scale(c["time"], 3.0), _scale(c["reward"], 2.0)))
    assert _rules(both)[0] == "rewards-only" and _rules(both)[-1] == "performance"


def test_teacher_path_per_teacher(tmp_path: Path):
    names = {"reward": "response/rewards/mean", "eval": "eval/gsm8k/acc",
             "time": "distillation/teacher_kl/gsm8k_teacher"}  # a KL series in the slot of a positive metric

    def misroute(c):
        _scale(c["time"], 2.0, start=5)
    verdict = _case(tmp_path, names, misroute)
    assert _rules(verdict) == ["teacher-path"]
    assert any(e.role == "distill_kl/gsm8k_teacher" for e in verdict.evidence)


def test_declared_roles_beat_the_names(tmp_path: Path):
    # a metric no preset knows, declared reward: rewards-only, not the catch-all
    names = {"reward": "my/judge_score", "eval": "eval/accuracy", "length": "response/response_len/mean"}
    verdict = _case(tmp_path, names, lambda c: _scale(c["reward"], 2.0),
                    extra={"roles": {"my/judge_score": "reward"}})
    assert _rules(verdict)[0] == "rewards-only"
    assert "1 declared in the baseline" in verdict.roles_note


def test_report_shows_the_evidence_table_and_every_ranked_rule(tmp_path: Path):
    verdict = _case(tmp_path, XTUNER, lambda c: _scale(c["reward"], 2.0))
    text = render_markdown(verdict)
    assert "## Triage evidence (per metric role, whole run)" in text
    assert "| reward | reward | `response/rewards/mean` | 1 | breached from step" in text
    assert "| eval | eval | `eval/accuracy` | 1 | within bounds at every step |" in text
    assert "1. **" in text and "2. " in text and "ranked below" in text


def test_nan_from_a_step_is_numerical_divergence(tmp_path: Path):
    def nan(c):
        for s in c["entropy"]:
            if s >= 10:
                c["entropy"][s] = float("nan")
    verdict = _case(tmp_path, XTUNER, nan)
    assert _rules(verdict)[0] == "non-finite"
    assert any(e.non_finite for e in verdict.evidence if e.role == "entropy")


def test_the_documented_rule_table_is_the_rule_table():
    import re

    from autotest.judge import triage

    documented = re.findall(r"^\| (\d+) \| ``([a-z-]+)`` \|", triage.__doc__ or "", flags=re.M)
    assert [(int(rank), name) for rank, name in documented] == [
        (i + 1, rule.name) for i, rule in enumerate(triage.RULES)]


def test_a_pooled_window_crossing_at_its_first_step_is_not_an_initialisation_breach():
    from autotest.judge.model import CheckResult
    from autotest.judge.triage import triage

    trace = Trace("t", MappingProxyType({}), train_steps=tuple(range(1, 26)), eval_steps=(0, 5, 10, 15, 20, 25))
    pooled = CheckResult("eval/digit_sum/acc[pooled 0-25]", "FAIL", "eval pooled", metric="eval/digit_sum/acc",
                         scope="pooled", first_breach_step=0)
    rewards = CheckResult("response/rewards/mean[points]", "FAIL", "rewards", metric="response/rewards/mean",
                          scope="points", first_breach_step=15)
    assert [f.rule for f in triage([pooled, rewards], trace)] == ["gradual"]
    stepwise = CheckResult("eval/digit_sum/acc[stepwise]", "FAIL", "eval step 0", metric="eval/digit_sum/acc",
                           scope="stepwise", first_breach_step=0)
    assert [f.rule for f in triage([stepwise, rewards], trace)] == ["first-step"]


def test_gradual_cites_the_located_breach_not_a_pooled_window_start():
    from autotest.judge.model import CheckResult
    from autotest.judge.triage import triage

    trace = Trace("t", MappingProxyType({}), train_steps=tuple(range(1, 26)), eval_steps=(0, 5, 10, 15, 20, 25))
    pooled = CheckResult("eval/acc[pooled 0-25]", "FAIL", "eval pooled", metric="eval/acc", scope="pooled",
                         first_breach_step=0)
    rewards = CheckResult("response/rewards/mean[points]", "FAIL", "rewards", metric="response/rewards/mean",
                          scope="points", first_breach_step=15)
    gradual = triage([pooled, rewards], trace)[0]
    assert gradual.evidence.startswith("response/rewards/mean first breached at step 15, after the start")
