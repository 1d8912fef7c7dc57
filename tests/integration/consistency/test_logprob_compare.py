"""The three-way log-prob comparison on the real embedded GRPO workload (collection on, real MSProbe dumps).

A rollout sampling at another temperature is a sampling-path divergence (through the whole consistency
job and the accuracy report); a clean run has all three paths agree; a module fault diverges between the
rollout model and the trainer while the recorded log-probs still equal the rollout's own recompute.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.cli import main as analyze_main
from autotest.consistency.job import _summary, run_consistency_job
from autotest.consistency.logprob_compare import NOT_PROVIDED
from tests.integration.consistency.test_job import accuracy_results
from tests.shared_build import content_key, shared_build
from tests import waits

K3 = "mismatch/mismatch_k3_kl"
WINDOW = 2


def collect_window(folder: Path, fault: str | None) -> Path:
    """A short GRPO run (4 prompts x 4 samples) whose step 2 is dumped; returns the collection folder."""
    out = folder / "collection"
    config = folder / "diagnostic.json"
    folder.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"output_dir": str(out), "window_step": WINDOW, "prompts_per_step": 4,
                                  "samples_per_prompt": 4, "micro_batch_size": 1, "max_forwards_per_side": 2,
                                  "msprobe_log_level": "error"}))
    command = [sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", str(folder / "work"), "--seed", "0",
               "--diagnostic-config", str(config)] + (["--fault", fault] if fault else [])
    waits.run(command, check=True, capture_output=True, limit_s=300)
    return out


def analyze(collection: Path, out: Path, logprobs: bool = True):
    return analyze_dumps(collection / "actor" / "dump", collection / "rollout" / "dump", out,
                         train_correlation=collection / "actor" / "correlation.jsonl",
                         rollout_correlation=collection / "rollout" / "correlation.jsonl",
                         context={"breached_metrics": [K3]}, logprobs=[collection / "logprobs"] if logprobs else None)


@pytest.fixture(scope="module")
def clean_window(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean run's collection, made once per session (xdist workers share it; the tests only read it)."""
    def build(folder: Path) -> None:
        collect_window(folder, None)

    return shared_build(tmp_path_factory, "clean-window", content_key(WINDOW, "clean"), build) / "collection"


@pytest.mark.slow
def test_a_rollout_sampling_at_another_temperature_is_a_sampling_path_divergence(tmp_path: Path) -> None:
    results = accuracy_results(tmp_path, "sampling-temperature:1.3", window=WINDOW)
    outcome = run_consistency_job(results)
    report = json.loads(outcome.report_json.read_text())
    assert (report["verdict"], report["divergence"]) == ("root_cause_found", "sampling_path")
    assert report["root_cause"]["bucket"] == "after_model"  # the regression's documented expectation
    sampling, model, end_to_end = report["logprob_comparison"]["pairs"]
    assert (sampling["status"], model["status"], end_to_end["status"]) == ("diverges", "agrees", "diverges")
    assert sampling["k3"] > 1e-3 and model["k3"] < 1e-10 and sampling["tokens"] > 1000
    worst = sampling["worst_tokens"][0]
    assert worst["recomputed"] == pytest.approx(worst["trainer"], abs=1e-5)
    assert abs(worst["recorded"] - worst["recomputed"]) == pytest.approx(sampling["max_abs_diff"])
    markdown = outcome.report_md.read_text()
    assert "divergence: **sampling_path**" in markdown
    assert "| step | sample | request | position | token id | recorded | recomputed | trainer |" in markdown
    assert f"| {WINDOW} | {worst['sample']} | {worst['request_id']} | {worst['position']} | {worst['token_id']} |" \
        in markdown
    assert not report["suspects"] and not (outcome.out_dir / "tensor").exists()  # no module to narrow to
    accuracy_report = (results / "report.md").read_text()
    assert "sampling-path divergence" in accuracy_report and "no divergence" not in accuracy_report


@pytest.mark.slow
def test_a_clean_run_has_all_three_paths_agree(clean_window: Path, tmp_path: Path) -> None:
    report = analyze(clean_window, tmp_path / "out")
    assert (report.verdict, report.divergence) == ("no_divergence", "aligned")
    pairs = report.logprobs["pairs"]
    assert [p["status"] for p in pairs] == ["agrees"] * 3 and all(p["tokens"] > 20 for p in pairs)
    assert pairs[0]["k3"] < 1e-12  # fp32 rollout: KV-cache sampling and prefill agree to rounding
    summary = _summary(report, [], [K3])
    assert "does not reproduce the breach" in summary and "no divergence" not in summary


@pytest.mark.slow
def test_a_bf16_rollout_is_rounding_noise_not_a_divergence(tmp_path: Path) -> None:
    report = analyze(collect_window(tmp_path, "bf16-rollout"), tmp_path / "out")
    pairs = {p["pair"]: p for p in report.logprobs["pairs"]}
    assert [p["status"] for p in pairs.values()] == ["agrees"] * 3 and report.divergence == "aligned"
    assert pairs["model"]["k3_threshold"] == 1e-5 and 0 < pairs["model"]["k3"] < 1e-5  # bf16 noise, tolerated


@pytest.mark.slow
def test_without_records_the_sampling_path_is_reported_unchecked(clean_window: Path, tmp_path: Path) -> None:
    report = analyze(clean_window, tmp_path / "out", logprobs=False)
    assert report.divergence == "sampling_path_unchecked"
    assert NOT_PROVIDED in (tmp_path / "out" / "output_5_root_cause_report.md").read_text()
    summary = _summary(report, [], [K3])
    assert summary.startswith(NOT_PROVIDED) and "no divergence" not in summary


@pytest.mark.slow
def test_a_module_fault_diverges_after_the_sampler_agrees(tmp_path: Path) -> None:
    report = analyze(collect_window(tmp_path, "rollout-impl"), tmp_path / "out")
    assert (report.verdict, report.divergence) == ("root_cause_found", "module")
    assert report.root_cause["module"].startswith("model.layers.1.mlp")
    sampling, model, _ = report.logprobs["pairs"]
    assert sampling["status"] == "agrees" and sampling["max_abs_diff"] < 1e-5  # recorded == recomputed
    assert model["status"] == "diverges"
    assert "the sampling path is clear" in _summary(report, [], [K3])


@pytest.mark.slow
def test_analyze_cli_reads_the_records_and_refuses_a_bad_file_in_one_line(clean_window: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    dumps = ["--train-dump", str(clean_window / "actor" / "dump"),
             "--rollout-dump", str(clean_window / "rollout" / "dump"),
             "--train-correlation", str(clean_window / "actor" / "correlation.jsonl"),
             "--rollout-correlation", str(clean_window / "rollout" / "correlation.jsonl"), "--out", str(tmp_path / "o")]
    assert analyze_main([*dumps, "--logprobs", str(clean_window / "logprobs")]) == 0
    assert "log-probs sampling_path (recorded vs recomputed): agrees" in capsys.readouterr().out
    bad = tmp_path / "recorded.jsonl"
    bad.write_text('{"kind": "recorded", "step": 2, "sample": 0, "positions": [4], "token_ids": [1], '
                   '"logprobs": [NaN]}\n')
    assert analyze_main([*dumps, "--logprobs", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:1: key 'logprobs[0]' is nan" in err
