"""End to end: real MSProbe dumps of each fault scenario → analyze_dumps() → the right judgement."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.verdict import RootCauseReport
from autotest.errors import UsageError

from .scenarios import ScenarioRun


def run(r: ScenarioRun, out: Path, **kwargs: object) -> RootCauseReport:
    return analyze_dumps(r.actor_dump, r.rollout_dump, out,
                         train_correlation=r.actor_log, rollout_correlation=r.rollout_log, **kwargs)  # type: ignore[arg-type]


def steps(report: RootCauseReport) -> dict[str, str]:
    return {s.name: s.status for s in report.steps}


def test_unsynced_mlp_weights_are_a_parameter_sync_mismatch_in_layer1_mlp(scenario_runs, tmp_path):
    report = run(scenario_runs["mlp_unsynced"], tmp_path)
    assert report.verdict == "root_cause_found"
    assert report.root_cause["bucket"] == "parameter_sync_mismatch"
    assert report.root_cause["localisation"] == "model.layers.1.mlp"
    assert report.previous_aligned_boundary == "model.layers.1.post_attention_layernorm"
    suspects = {s["module"]: s["bucket"] for s in report.suspects}
    assert suspects == {
        f"model.layers.1.mlp.{m}": "parameter_sync_mismatch" for m in ("gate_proj", "up_proj", "down_proj")
    }
    assert report.confidence == "medium"  # statistics only
    assert steps(report)["value comparison (tensor, elementwise)"] == "not_run"
    assert any("tensor" in c for c in report.next_checks)


def test_tensor_pass_gives_elementwise_evidence_and_high_confidence(scenario_runs, tmp_path):
    report = run(scenario_runs["mlp_unsynced_tensor"], tmp_path)
    assert report.verdict == "root_cause_found"
    assert report.root_cause["module"] == "model.layers.1.mlp.gate_proj"
    assert report.root_cause["evidence"] == "tensor"
    assert report.confidence == "high"
    assert steps(report)["value comparison (tensor, elementwise)"] == "executed"
    gate = next(s for s in report.suspects if s["module"].endswith("gate_proj"))
    assert "cosine" in gate["parameter_detail"]


def test_one_perturbed_matrix_is_localised_to_that_module(scenario_runs, tmp_path):
    report = run(scenario_runs["one_matrix"], tmp_path)
    assert report.root_cause["module"] == "model.layers.0.self_attn.o_proj"
    assert report.root_cause["bucket"] == "parameter_sync_mismatch"
    assert [s["module"] for s in report.suspects] == ["model.layers.0.self_attn.o_proj"]
    assert report.previous_aligned_boundary == "model.layers.0.self_attn.v_proj"


def test_changed_rmsnorm_epsilon_is_a_module_impl_mismatch(scenario_runs, tmp_path):
    report = run(scenario_runs["rmsnorm_eps"], tmp_path)
    assert report.root_cause["bucket"] == "module_impl_mismatch"
    assert report.root_cause["module"] == "model.layers.1.post_attention_layernorm"
    assert [s["module"] for s in report.suspects] == ["model.layers.1.post_attention_layernorm"]
    excluded = {e["module"] for e in report.excluded}
    assert "model.layers.1.mlp.gate_proj" in excluded  # downstream propagation, not a suspect


def test_changed_activation_is_a_module_impl_mismatch_with_class_note(scenario_runs, tmp_path):
    report = run(scenario_runs["activation"], tmp_path)
    assert report.root_cause["bucket"] == "module_impl_mismatch"
    assert report.root_cause["module"] == "model.layers.0.mlp.act_fn"
    assert any("class differs" in n for n in report.suspects[0]["notes"])


def test_difference_in_a_parents_own_code_is_attributed_to_the_parent(scenario_runs, tmp_path):
    report = run(scenario_runs["attention_scaling"], tmp_path)
    assert report.root_cause["bucket"] == "module_impl_mismatch"
    assert report.root_cause["module"] == "model.layers.0.self_attn"
    assert "o_proj" in report.root_cause["why"]
    assert report.previous_aligned_boundary == "model.layers.0.self_attn.v_proj"


@pytest.mark.parametrize("scenario", ["healthy_fp32", "bf16"])
def test_healthy_runs_raise_no_alert(scenario_runs, tmp_path, scenario):
    report = run(scenario_runs[scenario], tmp_path)
    assert report.verdict == "no_divergence"
    assert report.root_cause is None and report.suspects == () and report.hypothesis is None
    rows = json.loads((tmp_path / "output_3_value_compare.json").read_text())
    assert rows and {r["status"] for r in rows} == {"ok"}
    if scenario == "bf16":
        assert {r["precision"] for r in rows} >= {"bf16"}


def _cannot(report: RootCauseReport) -> set[str]:
    assert report.verdict == "cannot_conclude"
    assert report.root_cause is None and report.suspects == () and report.hypothesis is None
    md = Path(report.paths["outputs"]["root_cause_report_md"]).read_text()
    assert "no root cause is claimed" in md
    return {c.reason for c in report.cannot_conclude}


def test_missing_dump_side_cannot_conclude(scenario_runs, tmp_path):
    r = scenario_runs["mlp_unsynced"]
    report = analyze_dumps(tmp_path / "no-actor-dump", r.rollout_dump, tmp_path / "out",
                           train_correlation=r.actor_log, rollout_correlation=r.rollout_log)
    assert _cannot(report) == {"missing_dump_side"}
    assert steps(report)["collection: actor dump"] == "failed"
    assert steps(report)["pairing by request id"] == "not_run"


def test_missing_forward_folder_of_one_pair_cannot_conclude(scenario_runs, tmp_path):
    r = scenario_runs["mlp_unsynced"]
    actor = tmp_path / "actor-dump"
    shutil.copytree(r.actor_dump, actor)
    for forward in actor.iterdir():
        shutil.rmtree(forward / "step2")
    shutil.copytree(r.actor_dump / "forward_0000" / "step2", actor / "forward_0000" / "step2")
    # forward_0001's dump is gone, and its logged absolute path is hidden by a log rewritten to the copy
    log = tmp_path / "actor.jsonl"
    lines = [json.loads(line) for line in r.actor_log.read_text().splitlines()]
    for line in lines:
        line["dump_path"] = str(actor / line["dump_subdir"])
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = analyze_dumps(actor, r.rollout_dump, tmp_path / "out",
                           train_correlation=log, rollout_correlation=r.rollout_log)
    # one pair left: the analysis runs on it and says what is missing
    assert report.verdict == "root_cause_found"
    assert {c.reason for c in report.cannot_conclude} == {"missing_dump_side"}
    assert report.confidence == "low"
    assert any("missing_dump_side" in lim for lim in report.limitations)


def _rewrite_actor_log(r: ScenarioRun, tmp_path: Path, change) -> Path:
    lines = [json.loads(line) for line in r.actor_log.read_text().splitlines()]
    for line in lines:
        change(line)
    path = tmp_path / "actor.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _with_held_versions(r: ScenarioRun, tmp_path: Path, rollout_held: int, actor_held: int) -> RootCauseReport:
    """The real mlp_unsynced dumps with each side's own held weight version written into its correlation log."""
    logs = {}
    for side, log, held in (("rollout", r.rollout_log, rollout_held), ("actor", r.actor_log, actor_held)):
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        logs[side] = tmp_path / f"{side}.jsonl"
        logs[side].write_text("".join(json.dumps({**line, "held_weight_version": held}) + "\n" for line in lines))
    return analyze_dumps(r.actor_dump, r.rollout_dump, tmp_path / "out",
                         train_correlation=logs["actor"], rollout_correlation=logs["rollout"])


@pytest.mark.parametrize("behind", [1, 2])
def test_a_rollout_holding_older_weights_is_named_a_stale_sync_with_n(scenario_runs, tmp_path, behind):
    report = _with_held_versions(scenario_runs["mlp_unsynced"], tmp_path, 2 - behind, 2)
    assert report.root_cause["bucket"] == "parameter_sync_mismatch" and not report.cannot_conclude
    named = f"the rollout served weights {behind} version(s) behind the actor (a stale sync)"
    assert named in report.hypothesis["inference_path"]
    assert "(or it was loaded from a stale version)" not in report.hypothesis["inference_path"]
    assert any(line.startswith(f"weights: {named}") for line in report.evidence_chain)
    assert any(f"the rollout still held version {2 - behind}, the actor 2 ({behind} version(s) behind)" in c
               for c in report.next_checks)


def test_held_versions_in_sync_rule_a_stale_sync_out(scenario_runs, tmp_path):
    report = _with_held_versions(scenario_runs["mlp_unsynced"], tmp_path, 2, 2)
    assert "not a stale sync: both sides held weight version 2" in report.hypothesis["inference_path"]
    assert not any("stale sync" in line for line in report.evidence_chain)


def test_unpaired_request_ids_cannot_conclude(scenario_runs, tmp_path):
    r = scenario_runs["mlp_unsynced"]
    log = _rewrite_actor_log(
        r, tmp_path, lambda row: row.update(request_ids=[f"other-{i}" for i in row["request_ids"]])
    )
    report = analyze_dumps(r.actor_dump, r.rollout_dump, tmp_path / "out",
                           train_correlation=log, rollout_correlation=r.rollout_log)
    assert _cannot(report) == {"unpaired_samples"}
    assert any("other-s2-p0-r0" in c.detail for c in report.cannot_conclude)
    assert steps(report)["module mapping"] == "not_run"


def test_different_token_ids_cannot_conclude_even_though_dumps_differ(scenario_runs, tmp_path):
    report = run(scenario_runs["token_mismatch"], tmp_path)
    assert _cannot(report) == {"token_ids_differ"}
    assert "s2-p0-r0 at token 0" in report.cannot_conclude[0].detail


def test_weight_version_mismatch_cannot_conclude(scenario_runs, tmp_path):
    r = scenario_runs["healthy_fp32"]
    log = _rewrite_actor_log(r, tmp_path, lambda row: row.update(weight_version=row["weight_version"] + 1))
    report = analyze_dumps(r.actor_dump, r.rollout_dump, tmp_path / "out",
                           train_correlation=log, rollout_correlation=r.rollout_log)
    assert _cannot(report) == {"weight_version_mismatch"}


def test_missing_correlation_log_cannot_conclude(scenario_runs, tmp_path):
    r = scenario_runs["healthy_fp32"]
    report = analyze_dumps(r.actor_dump, r.rollout_dump, tmp_path / "out",
                           train_correlation=r.actor_log, rollout_correlation=tmp_path / "none.jsonl")
    assert _cannot(report) == {"missing_correlation_log"}


def test_same_folder_for_both_sides_is_a_usage_error(scenario_runs, tmp_path):
    r = scenario_runs["healthy_fp32"]
    with pytest.raises(UsageError, match="same"):
        analyze_dumps(r.actor_dump, r.actor_dump, tmp_path,
                      train_correlation=r.actor_log, rollout_correlation=r.rollout_log)


def test_report_lists_paths_and_context(scenario_runs, tmp_path):
    r = scenario_runs["rmsnorm_eps"]
    wrapper = tmp_path / "diag.sh"
    report = run(r, tmp_path / "out", wrapper_path=wrapper, context={"screening": {"first_breach_step": 2}})
    assert report.paths["wrapper"] == str(wrapper)
    assert report.paths["actor_correlation_log"] == str(r.actor_log)
    from importlib.metadata import version

    assert report.context["msprobe_version"] == version("mindstudio-probe")
    assert report.context["screening"] == {"first_breach_step": 2}
    assert steps(report)["screening (previous run metrics)"] == "executed"
    assert all(Path(p).is_file() for p in report.paths["outputs"].values())
