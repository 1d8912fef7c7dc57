"""The seed must be honoured: the saved config's seed, and runs at different seeds that are copies."""

from __future__ import annotations

import json
from pathlib import Path

from autotest.judge.model import ERROR, PASS
from autotest.judge.seed_use import identical_runs, logged_seed, seed_result
from autotest.judge.trace import Trace


def _trace(rewards: dict[int, float], step_time: float = 1.0) -> Trace:
    return Trace(source="t", series={"response/rewards/mean": rewards, "time/step": {1: step_time, 2: step_time}},
                 train_steps=(1, 2))


def test_the_saved_configs_seed_is_found_at_the_top_or_one_level_down(tmp_path: Path) -> None:
    top = tmp_path / "config.json"
    top.write_text(json.dumps({"seed": 11, "lr": 1e-3}))
    nested = tmp_path / "config.yaml"
    nested.write_text("train:\n  seed: 7\n")
    none = tmp_path / "other.json"
    none.write_text("[1, 2]")
    assert logged_seed([none, top]) == logged_seed([top])
    found = logged_seed([none, top])
    assert found is not None and found.seed == 11 and found.source == f"{top}: seed"
    found = logged_seed([nested])
    assert found is not None and found.seed == 7 and found.source.endswith("config.yaml: train.seed")
    assert logged_seed([none]) is None and logged_seed([tmp_path / "missing.json"]) is None


def test_a_run_that_logged_another_seed_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"seed": 0}))
    wrong = seed_result(11, logged_seed([config]))
    assert wrong is not None and wrong.status == ERROR and wrong.check_id == "run[seed]"
    assert wrong.message.startswith("seed not honoured: seed 11 was asked for but the run's saved config says 0")
    right = seed_result(0, logged_seed([config]))
    assert right is not None and right.status == PASS
    assert seed_result(11, None) is None  # nothing logged: nothing to say


def test_runs_at_different_seeds_that_are_identical_but_for_timing_are_copies() -> None:
    a, b = _trace({1: 0.1, 2: 0.2}, step_time=1.0), _trace({1: 0.1, 2: 0.2}, step_time=1.3)
    found = identical_runs([("run1-seed0", 0, a), ("run2-seed1", 1, b)])
    assert found is not None and found.status == ERROR and "run1-seed0 (seed 0) and run2-seed1 (seed 1)" in found.message
    assert identical_runs([("r1", 0, a), ("r2", 0, b)]) is None  # the same seed twice may well agree
    assert identical_runs([("r1", 0, a), ("r2", 1, _trace({1: 0.1, 2: 0.2000001}))]) is None


def test_copies_that_differ_only_in_memory_are_still_copies() -> None:
    from autotest.judge.seed_use import seed_metrics

    def run(rss: float) -> Trace:
        return Trace(source="t", series={"response/rewards/mean": {1: 0.1, 2: 0.2}, "memory/rss_mb": {1: rss, 2: rss},
                                         "train_mem_gpu_peaked_delta": {2: rss}}, train_steps=(1, 2))

    assert seed_metrics(run(400.0)) == ["response/rewards/mean"]
    found = identical_runs([("r1", 0, run(400.0)), ("r2", 1, run(431.5))])
    assert found is not None and found.status == ERROR
