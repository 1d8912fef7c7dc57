"""The live line speaks roles: one metric per role, reward and eval first, time last, whatever the names."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.live import live_values
from autotest.judge.trace import Trace


def _baseline(tmp_path: Path, metrics: list[str], extra: dict | None = None):
    doc = {"golden": {"table": {m: {1: 1.0} for m in metrics}},
           "checks": [{"metric": m, "method": "absolute", "operator": "<", "threshold": 1.0} for m in metrics],
           **(extra or {})}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_baseline(path)


def _trace(metrics: list[str]) -> Trace:
    return Trace("t", MappingProxyType({m: {1: 2.0} for m in metrics}), train_steps=(1,))


def test_trl_names_show_as_roles_in_priority_order(tmp_path: Path):
    metrics = ["step_time", "completions/mean_length", "kl", "reward"]
    baseline = _baseline(tmp_path, metrics)
    line = live_values(baseline, _trace([]).__class__("g", MappingProxyType({m: {1: 1.0} for m in metrics})),
                       _trace(metrics), 1)
    assert line == "reward=2 (golden 1) response_length=2 (golden 1) ref_kl=2 (golden 1) step_time=2 (golden 1)"


def test_one_metric_per_role_and_unknown_names_after_the_roles(tmp_path: Path):
    metrics = ["time/step", "my/custom", "response/rewards/max", "response/rewards/mean", "mismatch/mismatch_k3_kl"]
    baseline = _baseline(tmp_path, metrics)
    golden = Trace("g", MappingProxyType({}))
    line = live_values(baseline, golden, _trace(metrics), 1)
    assert line == "reward=2 mismatch=2 my/custom=2 step_time=2"


def test_a_declared_role_names_the_metric(tmp_path: Path):
    baseline = _baseline(tmp_path, ["judge/score", "time/step"], {"roles": {"judge/score": "reward"}})
    line = live_values(baseline, Trace("g", MappingProxyType({})), _trace(["judge/score", "time/step"]), 1)
    assert line == "reward=2 step_time=2"
