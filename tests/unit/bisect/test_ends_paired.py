"""A bisect whose good end fails today: its two ends' runs judged against each other by the paired gates say
whether the code between them moved training too (real results folders with tracker copies, no training)."""

from __future__ import annotations

import json
from pathlib import Path

from autotest.bisect.probe import ProbeResult
from autotest.bisect.search import BAD
from autotest.bisect.session import BisectOptions, ends_paired
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from tests.helpers import ROOT


def _results(folder: Path, reward_shift: float = 0.0) -> Path:
    """A results folder whose tracker copy is the golden, the rewards shifted by ``reward_shift``."""
    golden = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml").golden_table
    rows: dict[int, dict[str, float]] = {}
    for metric, series in golden.items():
        for step, value in series.items():
            shift = reward_shift if metric == "response/rewards/mean" else 0.0
            rows.setdefault(step, {"step": step})[metric] = value + shift
    folder.mkdir()
    (folder / "tracker.jsonl").write_text("".join(json.dumps(rows[s]) + "\n" for s in sorted(rows)))
    return folder


def _probe(commit: str, folder: Path) -> ProbeResult:
    return ProbeResult(commit, BAD, "high", 1, 1.0, results_dir=str(folder))


def test_ends_that_train_alike_point_at_the_environment_alone(tmp_path):
    line = ends_paired(load_case("tiny-grpo"), BisectOptions(good="g", bad="b", seed=11),
                       _probe("g", _results(tmp_path / "good")), _probe("b", _results(tmp_path / "bad")))
    assert line.startswith("paired against each other today (seed 11), the good and the bad ref train alike")


def test_ends_that_train_apart_say_a_code_change_is_there_too(tmp_path):
    line = ends_paired(load_case("tiny-grpo"), BisectOptions(good="g", bad="b"),
                       _probe("g", _results(tmp_path / "good")),
                       _probe("b", _results(tmp_path / "bad", reward_shift=-0.1)))
    assert "the bad ref also trains apart from the good one" in line
    assert "response/rewards/mean[paired 16-30]" in line and "bisect again" in line


def test_an_end_without_a_log_is_not_judged_paired(tmp_path):
    (tmp_path / "bad").mkdir()
    line = ends_paired(load_case("tiny-grpo"), BisectOptions(good="g", bad="b"),
                       _probe("g", _results(tmp_path / "good")), _probe("b", tmp_path / "bad"))
    assert line.startswith("the ends were not judged paired (") and "no readable metric log" in line
