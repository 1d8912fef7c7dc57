"""Triage of memory gates (rule ``memory``): a leak or a larger peak is named, and never read as accuracy."""

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
XTUNER = {"reward": "response/rewards/mean", "mismatch": "mismatch/mismatch_k3_kl", "eval": "eval/accuracy",
          "rss": "memory/rss_mb", "peak": "memory/peak_rss_mb"}
VERL = {"reward": "critic/score/mean", "mismatch": "rollout_corr/k3_kl", "eval": "val-core/gsm8k/acc/mean@1",
        "rss": "perf/cpu_memory_used_gb", "peak": "perf/max_memory_allocated_gb"}


def _golden(names: dict[str, str]) -> dict[str, dict[int, float]]:
    series = {
        "reward": {s: 0.01 + 0.02 * s for s in STEPS},
        "mismatch": {s: 1e-8 for s in STEPS},
        "eval": {s: 0.2 + 0.01 * s for s in EVALS},
        "rss": {s: 420.0 + (1.0 if s % 2 else -1.0) for s in STEPS},
        "peak": {s: 425.0 for s in STEPS},
    }
    return {names[k]: v for k, v in series.items()}


def _case(tmp_path: Path, names: dict[str, str], change):
    golden = _golden(names)
    checks = [{"metric": names["reward"], "method": "absolute", "operator": "<", "threshold": 0.05},
              {"metric": names["mismatch"], "method": "absolute", "operator": "<", "threshold": 1e-4},
              {"metric": names["eval"], "method": "absolute", "operator": "<", "threshold": 0.05, "scope": "final"},
              {"metric": names["peak"], "method": "relative", "operator": "<", "threshold": 0.01, "scope": "final"},
              {"metric": names["rss"], "method": "slowdown", "operator": "<", "threshold": 0.34, "scope": "slope"}]
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": golden}, "checks": checks}))
    current = {m: dict(v) for m, v in golden.items()}
    change({k: current[names[k]] for k in names})
    trace = Trace("current", MappingProxyType(current), train_steps=tuple(STEPS), eval_steps=EVALS)
    return compare(load_baseline(path), trace).verdict


def _leak(c, mb_per_step=4.0):
    for s in c["rss"]:
        c["rss"][s] += mb_per_step * (s - 1)
        c["peak"][s] = max(c["peak"][s], c["rss"][s])


def _rules(verdict):
    return [f.rule for f in verdict.triage]


def test_a_leak_fails_the_leak_and_peak_gates_and_triages_to_memory(tmp_path: Path):
    verdict = _case(tmp_path, XTUNER, _leak)
    failing = {r.check_id for r in verdict.results if r.status == "FAIL"}
    assert verdict.status == "FAIL"
    assert failing == {"memory/rss_mb[slope]", "memory/peak_rss_mb[final]"}
    assert _rules(verdict) == ["memory"]
    finding = verdict.triage[0]
    assert finding.primary and finding.suggestion.startswith("memory regression: a leak (growth per step)")
    assert "memory/" in finding.evidence
    memory = [e for e in verdict.evidence if e.group == "memory"]
    assert memory and all(e.breached for e in memory)
    report = render_markdown(verdict)
    assert "growth: " in report and "| memory |" in report


def test_a_larger_peak_alone_is_memory_too(tmp_path: Path):
    def bigger(c):
        for s in c["peak"]:
            c["peak"][s] *= 1.05

    verdict = _case(tmp_path, XTUNER, bigger)
    assert [r.check_id for r in verdict.results if r.status == "FAIL"] == ["memory/peak_rss_mb[final]"]
    assert _rules(verdict) == ["memory"]


def test_memory_is_reported_beside_an_accuracy_finding_never_instead(tmp_path: Path):
    def both(c):
        _leak(c)
        for s in c["reward"]:
            c["reward"][s] *= 2.0

    verdict = _case(tmp_path, XTUNER, both)
    rules = _rules(verdict)
    assert rules[0] != "memory" and rules[-1] == "memory"
    memory = verdict.triage[-1]
    assert not memory.primary and memory.why_ranked.startswith("memory is reported beside")


def test_a_healthy_run_with_memory_noise_passes(tmp_path: Path):
    def noise(c):
        for s in c["rss"]:
            c["rss"][s] += 2.0 if s % 3 == 0 else -1.0

    verdict = _case(tmp_path, XTUNER, noise)
    assert verdict.status == "PASS" and not verdict.triage


def test_verl_memory_names_have_the_memory_role(tmp_path: Path):
    verdict = _case(tmp_path, VERL, _leak)
    assert _rules(verdict) == ["memory"]
    assert verdict.metric_roles["perf/max_memory_allocated_gb"] == "memory"
