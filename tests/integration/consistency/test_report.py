from __future__ import annotations

import csv
import json

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.report import FILES, output_paths


def strict_json(path):
    def refuse(token):
        raise AssertionError(f"{path}: non-standard JSON constant {token}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_every_artifact_is_written_with_its_columns(scenario_runs, tmp_path):
    run = scenario_runs["one_matrix"]
    report = analyze_dumps(run.actor_dump, run.rollout_dump, tmp_path,
                           train_correlation=run.actor_log, rollout_correlation=run.rollout_log)
    assert set(report.paths["outputs"]) == set(output_paths(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{stem}.{ext}"
        for name, stem in FILES.items()
        for ext in (("json", "md") if name == "root_cause_report" else ("json", "csv"))
    )

    key_mapping = strict_json(tmp_path / "output_1_key_mapping.json")
    assert set(key_mapping[0]) == {
        "train_key",
        "rollout_keys",
        "layer_index",
        "block",
        "cardinality",
        "confidence",
        "kind",
        "notes",
    }
    row = next(r for r in key_mapping if r["train_key"] == "Module.model.layers.1.mlp.up_proj.Linear.forward.0")
    assert row["layer_index"] == 1 and row["block"] == "mlp" and row["cardinality"] == "1:1"

    mapping = strict_json(tmp_path / "output_2_mapping.json")
    assert mapping["Module.lm_head.Linear.forward.0"] == ["Module.lm_head.Linear.forward.0"]

    values = strict_json(tmp_path / "output_3_value_compare.json")
    o_proj = next(
        v for v in values if v["module"] == "model.layers.0.self_attn.o_proj" and v["component"] == "parameter"
    )
    assert o_proj["status"] == "alert" and o_proj["priority"] == 1
    assert o_proj["stats"]["Norm"]["rel_err"] > 1e-2 and o_proj["shape"]["status"] == "same"
    with (tmp_path / "output_3_value_compare.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(values)
    assert {
        "Max_train",
        "Norm_rel_err",
        "Mean_status",
        "shape_status",
        "dtype_status",
        "tensor_cosine",
        "priority",
    } <= set(rows[0])

    modules = strict_json(tmp_path / "output_4_module_analysis.json")
    assert {m["pair"] for m in modules} == {"step2:actor0000~rollout0000", "step2:actor0001~rollout0001"}
    assert {"output", "parameters", "inputs", "bucket", "explained_by"} <= set(modules[0])

    doc = strict_json(tmp_path / "output_5_root_cause_report.json")
    assert doc["verdict"] == "root_cause_found" and doc["root_cause"]["module"] == "model.layers.0.self_attn.o_proj"
    md = (tmp_path / "output_5_root_cause_report.md").read_text()
    for section in (
        "## Context",
        "## Final judgement",
        "## Evidence chain",
        "## Key suspects",
        "## Excluded candidates",
        "## Hypothesis",
        "## Next checks",
        "## Steps executed / verified / not run",
        "## Limitations",
        "## Notes and paths",
    ):
        assert section in md, section
    assert "expected train path" in md and "inference path" in md
    assert str(run.actor_log) in md and "why this is the first credible boundary" in md
    assert "value comparison (tensor, elementwise): **not_run**" in md
