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


# --- the data composition reading (issue 44): what each step was fed, where the log says it -------------------------

DISTINCT, REPEATED = "data/distinct_prompts", "data/repeated_prompts"
SUM, PRODUCT = "data/source/digit_sum", "data/source/digit_product"


def _composition(tmp_path: Path, data: dict[str, dict[int, float]], golden_data: dict[str, dict[int, float]] | None = None,
                 reward=lambda s: -0.01 * s):
    """A run whose rewards fall below the golden (a FAIL), with the data metrics ``data``; the golden carries
    ``golden_data`` (as reference checks) when given."""
    from autotest.judge.data_evidence import COMPOSITION

    checks = [{"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.05}]
    table = {REWARD: _golden()[REWARD]}
    for metric, series in (golden_data or {}).items():
        table[metric] = series
        checks.append({"metric": metric, "method": "absolute", "operator": "<", "threshold": 0.5,
                       "severity": "reference"})
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": table, "noise": {REWARD: {s: 0.01 for s in STEPS}}},
                                    "checks": checks}))
    series = {REWARD: {s: v + reward(s) for s, v in _golden()[REWARD].items()}, **data}
    trace = Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                  train_steps=tuple(STEPS), eval_steps=())
    verdict = compare(load_baseline(path), trace).verdict
    return verdict, next((m for m in verdict.measured if m.hypothesis == COMPOSITION), None)


def _each(value) -> dict[int, float]:
    return {s: float(value(s) if callable(value) else value) for s in STEPS}


def test_every_prompt_drawn_twice_is_a_data_finding_naming_the_metric(tmp_path: Path) -> None:
    """The issue's case: every prompt of a step handed over twice read as "check the sampling settings"; the log's
    repeated prompts say it is the data (the golden has no data metric: a sampler hands each row once)."""
    verdict, reading = _composition(tmp_path, {DISTINCT: _each(32), REPEATED: _each(32), SUM: _each(64)})
    assert verdict.status == "FAIL" and reading.holds
    assert reading.values["metric"] == REPEATED and reading.values["onset"] == "1"
    assert "32 against 0" in reading.finding and "30 of 30 steps" in reading.finding
    primary = verdict.triage[0]
    assert primary.rule == "training-data"
    assert REPEATED in primary.suggestion and "the data loader and sampler" in primary.suggestion
    assert "sampling settings (temperature" not in primary.suggestion
    assert len(primary.suggestion.split()) <= 70  # the next-step line's bound (test_next_step.py)


def test_clean_data_metrics_do_not_read_as_data(tmp_path: Path) -> None:
    """Claim false: the same FAIL with every prompt distinct and one source: the reading is taken and does not hold."""
    verdict, reading = _composition(tmp_path, {DISTINCT: _each(64), REPEATED: _each(0), SUM: _each(64)})
    assert verdict.status == "FAIL" and not reading.holds
    assert "never 3 steps in a row off the reference" in reading.finding
    assert not any(f.rule == "training-data" for f in verdict.triage)


def test_repeats_at_two_steps_in_a_row_are_not_a_changed_composition(tmp_path: Path) -> None:
    """Claim false: a few repeats at isolated steps (a sampler that draws with replacement) are not a change."""
    repeats = _each(lambda s: 8 if s in (4, 5, 11, 12, 20) else 0)
    verdict, reading = _composition(tmp_path, {DISTINCT: _each(lambda s: 64 - repeats[s]), REPEATED: repeats})
    assert not reading.holds


def test_small_repeats_below_a_twentieth_of_the_step_are_not_read(tmp_path: Path) -> None:
    repeats = _each(2)
    verdict, reading = _composition(tmp_path, {DISTINCT: _each(62), REPEATED: repeats, SUM: _each(64)})
    assert not reading.holds


def test_a_source_mixed_in_from_a_step_is_named_with_its_counts(tmp_path: Path) -> None:
    """From step 16 every fourth prompt is another source's: the new source's count leaves 0 (the run's own first
    steps), the old one's falls; the reading names the first by role order and name (digit_product)."""
    verdict, reading = _composition(tmp_path, {
        SUM: _each(lambda s: 48 if s >= 16 else 64), PRODUCT: {s: 16.0 for s in STEPS if s >= 16},
        DISTINCT: _each(64), REPEATED: _each(0)}, reward=lambda s: -0.2 if s >= 16 else 0.0)
    assert reading.holds and reading.values["metric"] == PRODUCT and reading.values["onset"] == "16"
    assert "16 against 0" in reading.finding and "first 3 steps" in reading.values["reference_kind"]
    primary = verdict.triage[0]
    assert primary.rule == "training-data" and PRODUCT in primary.suggestion and "data mix" in primary.suggestion


def test_a_mixture_drawn_at_random_stays_within_its_binomial_noise(tmp_path: Path) -> None:
    """Claim false: two sources drawn 50/50 per prompt vary by about 4 of 64 per step; that is not a changed mix."""
    import random

    rng = random.Random(7)
    sums = {s: float(sum(rng.random() < 0.5 for _ in range(64))) for s in STEPS}
    verdict, reading = _composition(tmp_path, {SUM: sums, PRODUCT: {s: 64 - v for s, v in sums.items()}})
    assert verdict.status == "FAIL" and not reading.holds


def test_a_golden_with_data_metrics_is_the_reference(tmp_path: Path) -> None:
    """Where the golden logs the composition, the run is held against it: half the distinct prompts of the golden's."""
    verdict, reading = _composition(tmp_path, {DISTINCT: _each(32)}, golden_data={DISTINCT: _each(64)})
    assert reading.holds and reading.values["reference_kind"] == "the golden's"
    assert reading.values["direction"] == "below" and "32 against 64" in reading.finding
    verdict, reading = _composition(tmp_path, {DISTINCT: _each(64)}, golden_data={DISTINCT: _each(64)})
    assert not reading.holds


def test_no_data_metric_no_composition_reading(tmp_path: Path) -> None:
    verdict, reading = _composition(tmp_path, {})
    assert verdict.status == "FAIL" and reading is None
