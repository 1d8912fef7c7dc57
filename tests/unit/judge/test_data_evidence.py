"""The train-against-eval reading: training scores and eval scores leaving the golden in opposite directions are
other training data (rule training-data); the same direction is any change to how the policy learns."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.data_evidence import TRAIN_EVAL
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare

STEPS = range(1, 31)
EVALS = (0, 10, 20, 30)
REWARD, EVAL = "response/rewards/mean", "eval/accuracy"


def _golden() -> dict[str, dict[int, float]]:
    return {REWARD: {s: 0.05 + 0.02 * s for s in STEPS}, EVAL: {s: 0.05 + 0.02 * s for s in EVALS}}


def _verdict(tmp_path: Path, reward=lambda s: 0.0, eval_=lambda s: 0.0):
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.2},
              {"metric": EVAL, "method": "absolute", "operator": "<", "threshold": 0.05, "scope": "final"}]
    golden = {"table": _golden(), "noise": {REWARD: {s: 0.01 for s in STEPS}}}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    series = {REWARD: {s: v + reward(s) for s, v in _golden()[REWARD].items()},
              EVAL: {s: v + eval_(s) for s, v in _golden()[EVAL].items()}}
    trace = Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                  train_steps=tuple(STEPS), eval_steps=EVALS)
    verdict = compare(load_baseline(path), trace).verdict
    return verdict, next((m for m in verdict.measured if m.hypothesis == TRAIN_EVAL), None)


def test_training_scores_up_while_eval_falls_is_other_training_data(tmp_path: Path) -> None:
    """A sampler that repeats the easiest shard: the policy fits its training prompts and fails the eval set."""
    verdict, reading = _verdict(tmp_path, reward=lambda s: 0.01 * s, eval_=lambda s: -0.004 * s)
    assert reading.holds and reading.values["train_direction"] == "above" and reading.values["eval_direction"] == "below"
    primary = verdict.triage[0]
    assert primary.rule == "training-data" and "the sampler and its shard / epoch index" in primary.suggestion


def test_both_falling_is_how_the_policy_learns_not_its_data(tmp_path: Path) -> None:
    verdict, reading = _verdict(tmp_path, reward=lambda s: -0.005 * s, eval_=lambda s: -0.004 * s)
    assert not reading.holds and "both one way" in reading.finding
    assert "training-data" not in [f.rule for f in verdict.triage]


def test_an_eval_drop_with_rewards_in_their_noise_is_no_data_reading(tmp_path: Path) -> None:
    verdict, reading = _verdict(tmp_path, eval_=lambda s: -0.004 * s)
    assert not reading.holds and "never left the per-step noise" in reading.finding
    assert verdict.triage[0].rule == "eval-path"


def test_with_only_eval_breached_the_eval_path_ranks_first_and_the_data_second(tmp_path: Path) -> None:
    """Rewards above the golden under their gate: the eval path is named first (only eval breached), the data next."""
    verdict, reading = _verdict(tmp_path, reward=lambda s: 0.005 * s, eval_=lambda s: -0.004 * s)
    assert reading.holds
    assert [f.rule for f in verdict.triage][:2] == ["eval-path", "training-data"]


def test_a_policy_sharpened_first_is_how_it_learns_even_with_the_scores_apart(tmp_path: Path) -> None:
    """A learning rate x 10: the entropy falls from step 2, the training rewards rise from step 7, eval ends lower.
    The scores move apart as with other data, but the policy's own distribution moved first."""
    entropy = "entropy/mean"
    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.2},
              {"metric": entropy, "method": "absolute", "operator": "<", "threshold": 5.0},
              {"metric": EVAL, "method": "absolute", "operator": "<", "threshold": 0.05, "scope": "final"}]
    table = {**_golden(), entropy: {s: 2.0 - 0.03 * s for s in STEPS}}
    golden = {"table": table, "noise": {REWARD: {s: 0.01 for s in STEPS}, entropy: {s: 0.01 for s in STEPS}}}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    series = {REWARD: {s: v + (0.01 * s if s >= 7 else 0.0) for s, v in table[REWARD].items()},
              entropy: {s: v - (0.05 * s if s >= 2 else 0.0) for s, v in table[entropy].items()},
              EVAL: {s: v - 0.004 * s for s, v in table[EVAL].items()}}
    trace = Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                  train_steps=tuple(STEPS), eval_steps=EVALS)
    verdict = compare(load_baseline(path), trace).verdict
    reading = next(m for m in verdict.measured if m.hypothesis == TRAIN_EVAL)
    assert not reading.holds and "entropy/mean left the golden first (step 2)" in reading.finding
    assert "training-data" not in [f.rule for f in verdict.triage]
