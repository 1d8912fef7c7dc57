"""Write the analysis artifacts (output_1 … output_5). Renders results; computes nothing new.

- ``output_1_key_mapping.{json,csv}``: train_key, rollout_keys, layer_index, block, cardinality,
  confidence, kind, notes.
- ``output_2_mapping.{json,csv}``: train_key → [rollout_keys].
- ``output_3_value_compare.{json,csv}``: per tensor and statistic {train, rollout, rel_err,
  status}, shape/dtype status, tensor metrics when dumped, priority.
- ``output_4_module_analysis.{json,csv}``: per module output/parameters/inputs consistency and bucket.
- ``output_5_root_cause_report.{json,md}``: the judgement (see :mod:`.verdict`).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.consistency.classify import ModuleAnalysis
from autotest.consistency.dumps import STATS, parse_key
from autotest.consistency.logprob_compare import NOT_PROVIDED
from autotest.consistency.logprob_records import KINDS
from autotest.consistency.mapping import MappingGroup, block_of, layer_index
from autotest.consistency.value_compare import GroupCompare
from autotest.consistency.logprob_verdict import AFTER_MODEL, DECODE_PATH
from autotest.consistency.precision import PRECISION
from autotest.consistency.verdict import RootCauseReport

FILES = {
    "key_mapping": "output_1_key_mapping",
    "mapping": "output_2_mapping",
    "value_compare": "output_3_value_compare",
    "module_analysis": "output_4_module_analysis",
    "root_cause_report": "output_5_root_cause_report",
}


def _clean(value: Any) -> Any:
    """Strict JSON: non-finite floats become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(_clean(doc), indent=2, allow_nan=False) + "\n", encoding="utf-8")


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({c: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v for c, v in row.items()})


def key_mapping_rows(groups: Sequence[MappingGroup]) -> list[dict[str, Any]]:
    rows = []
    for g in groups:
        anchor = (g.train_keys or g.rollout_keys)[0]
        parsed = parse_key(anchor)
        module = parsed[0] if parsed else anchor
        for train_key in g.train_keys or ("",):
            rows.append(
                {
                    "train_key": train_key,
                    "rollout_keys": list(g.rollout_keys),
                    "layer_index": layer_index(anchor),
                    "block": block_of(module),
                    "cardinality": g.cardinality,
                    "confidence": g.confidence,
                    "kind": g.kind,
                    "notes": list(g.notes),
                }
            )
    return rows


def value_rows(pair_id: str, compares: Sequence[GroupCompare]) -> list[dict[str, Any]]:
    rows = []
    for order, c in enumerate(compares):
        for t in c.tensors:
            rows.append(
                {
                    "pair": pair_id,
                    "order": order,
                    "module": c.module_path,
                    "train_keys": list(c.group.train_keys),
                    "rollout_keys": list(c.group.rollout_keys),
                    "tensor": t.path,
                    "component": t.component,
                    "precision": t.precision,
                    "stats": {
                        s: {
                            "train": t.train.stats.get(s),
                            "rollout": t.rollout.stats.get(s),
                            "rel_err": t.stat_rel_err.get(s),
                            "status": t.stat_status.get(s, "not_comparable"),
                        }
                        for s in STATS
                    },
                    "shape": {"train": list(t.train.shape), "rollout": list(t.rollout.shape), "status": t.shape_status},
                    "dtype": {"train": t.train.dtype, "rollout": t.rollout.dtype, "status": t.dtype_status},
                    "tensor_metrics": None
                    if t.tensor is None
                    else {
                        "cosine": t.tensor.cosine,
                        "max_abs_err": t.tensor.max_abs_err,
                        "max_rel_err": t.tensor.max_rel_err,
                        "rel_err": t.tensor.rel_err,
                        "status": t.tensor.status,
                    },
                    "status": t.status,
                    "evidence": t.evidence,
                    "priority": t.priority,
                }
            )
    return rows


def _flat_value_row(row: Mapping[str, Any]) -> dict[str, Any]:
    flat = {k: row[k] for k in ("pair", "order", "module", "tensor", "component", "precision")}
    for s in STATS:
        for field in ("train", "rollout", "rel_err", "status"):
            flat[f"{s}_{field}"] = row["stats"][s][field]
    for part in ("shape", "dtype"):
        for field in ("train", "rollout", "status"):
            flat[f"{part}_{field}"] = row[part][field]
    metrics = row["tensor_metrics"] or {}
    for field in ("cosine", "max_abs_err", "max_rel_err", "rel_err", "status"):
        flat[f"tensor_{field}"] = metrics.get(field)
    flat.update(status=row["status"], evidence=row["evidence"], priority=row["priority"])
    flat["train_keys"], flat["rollout_keys"] = row["train_keys"], row["rollout_keys"]
    return flat


def module_rows(pair_id: str, analyses: Sequence[ModuleAnalysis]) -> list[dict[str, Any]]:
    return [
        {
            "pair": pair_id,
            "order": a.order,
            "module": a.module_path,
            "train_keys": list(a.compare.group.train_keys),
            "rollout_keys": list(a.compare.group.rollout_keys),
            "output": a.output,
            "parameters": a.parameters,
            "inputs": a.inputs,
            "bucket": a.bucket,
            "explained_by": a.explained_by,
            "credible_boundary_candidate": a.credible,
            "evidence": a.compare.evidence(),
            "notes": list(a.notes),
        }
        for a in analyses
    ]


def write_outputs(
    out_dir: Path,
    groups: Sequence[MappingGroup],
    compares: Mapping[str, Sequence[GroupCompare]],
    analyses: Mapping[str, Sequence[ModuleAnalysis]],
    report: RootCauseReport,
) -> dict[str, str]:
    """Write every artifact into ``out_dir``; returns name → path of each file written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}

    def emit(name: str, doc: Any, rows: Sequence[Mapping[str, Any]] | None, columns: Sequence[str] = ()) -> None:
        base = out_dir / FILES[name]
        _write_json(base.with_suffix(".json"), doc)
        written[f"{name}_json"] = str(base.with_suffix(".json"))
        if rows is not None:
            _write_csv(base.with_suffix(".csv"), rows, columns)
            written[f"{name}_csv"] = str(base.with_suffix(".csv"))

    km = key_mapping_rows(groups)
    emit(
        "key_mapping",
        km,
        km,
        ("train_key", "rollout_keys", "layer_index", "block", "cardinality", "confidence", "kind", "notes"),
    )
    simple = {r["train_key"]: r["rollout_keys"] for r in km if r["train_key"]}
    emit(
        "mapping",
        simple,
        [{"train_key": k, "rollout_keys": v} for k, v in simple.items()],
        ("train_key", "rollout_keys"),
    )
    values = [row for pid, cmps in compares.items() for row in value_rows(pid, cmps)]
    flat = [_flat_value_row(r) for r in values]
    emit("value_compare", values, flat, list(flat[0]) if flat else ["pair"])
    mods = [row for pid, an in analyses.items() for row in module_rows(pid, an)]
    emit("module_analysis", mods, mods, list(mods[0]) if mods else ["pair"])
    base = out_dir / FILES["root_cause_report"]
    _write_json(base.with_suffix(".json"), report.to_dict())
    base.with_suffix(".md").write_text(render_markdown(report), encoding="utf-8")
    written["root_cause_report_json"] = str(base.with_suffix(".json"))
    written["root_cause_report_md"] = str(base.with_suffix(".md"))
    return written


def output_paths(out_dir: Path) -> dict[str, str]:
    """Where :func:`write_outputs` puts each artifact (known before writing, for the report)."""
    paths = {}
    for name, stem in FILES.items():
        for suffix in ("json", "md") if name == "root_cause_report" else ("json", "csv"):
            paths[f"{name}_{suffix}"] = str(out_dir / f"{stem}.{suffix}")
    return paths


DIVERGENCE = {
    "sampling_path": "the log-probs the rollout recorded while sampling differ from its own model's recompute",
    "decode_path": "the recorded log-probs equal the rollout's own prefill recompute on the prefill-scored token and "
                   "differ from a decode forward on (KV cache, decode position ids)",
    "module": "the rollout model and the trainer compute different log-probs",
    "precision": "the sides compute the forward in different dtypes, and the log-probs carry the difference",
    "sampling_path_and_module": "both the rollout's sampling path and a module diverge",
    "aligned": "recorded, recomputed and trainer log-probs agree and every module is aligned",
    "sampling_path_unchecked": "every module is aligned; the sampling path was not checked",
    "undetermined": "the analysis could not place the divergence",
}


def _logprob_section(comparison: Mapping[str, Any] | None) -> list[str]:
    """The three-way comparison: one row per pair, then the tokens that show each diverging pair."""
    lines = ["", "## Log-prob paths (recorded while sampling / rollout recompute / trainer)", ""]
    if not comparison:
        return lines + ["- not run"]
    lines += [f"- finding: **{comparison['finding']}** (a pair diverges when its k3 over the window exceeds its "
              "threshold: 1e-09 when both sides compute in fp32, else 1e-05, the bf16 noise x 5); records: "
              + (", ".join(f"{k} {n} sample(s)" for k, n in comparison["provided"].items()) or "none"), "",
              "| pair | compared | status | tokens | max abs diff | mean abs diff | k3 | k3 threshold |",
              "|---|---|---|---|---|---|---|---|"]
    for p in comparison["pairs"]:
        numbers = ("-", "-", "-", "-") if p["k3"] is None else (
            f"{p['max_abs_diff']:.3e}", f"{p['mean_abs_diff']:.3e}", f"{p['k3']:.3e}", f"{p['k3_threshold']:.0e}")
        status = p["status"] if p["status"] != "not_compared" else f"not compared: {p['detail']}"
        lines.append(f"| {p['pair']} | {p['reference']} vs {p['other']} | {status} | {p['tokens']} | "
                     + " | ".join(numbers) + " |")
    lines += ["", "By what scored the token (prefill: a sample's first response token; first decode: the next one, "
              "scored by the first decode forward over the KV cache; later decode: the rest):", "",
              "| pair | phase | status | tokens | max abs diff | k3 | first over the threshold (position, response "
              "token) |", "|---|---|---|---|---|---|---|"]
    for p in comparison["pairs"]:
        for ph in p.get("phases", []):
            if ph["status"] != "not_compared":
                first = ph["first"]
                lines.append(f"| {p['pair']} | {ph['phase']} | {ph['status']} | {ph['tokens']} | "
                             f"{ph['max_abs_diff']:.3e} | {ph['k3']:.3e} | "
                             + (f"{first['position']}, {first['index']} |" if first else "- |"))
    if comparison.get("kv_path"):
        lines += ["", f"- {comparison['kv_path']['line']}"]
    diverging = [p for p in comparison["pairs"] if p["status"] == "diverges"]
    # end to end is the sum of the other two: its tokens only when neither of them shows the divergence
    for p in [p for p in diverging if p["pair"] != "end_to_end"] or diverging:
        if p["status"] == "diverges":
            lines += ["", f"Tokens that differ most, {p['pair']} ({p['reference']} vs {p['other']}):", "",
                      "| step | sample | request | position | token id | recorded | recomputed | trainer |",
                      "|---|---|---|---|---|---|---|---|"]
            lines += [f"| {t['step']} | {t['sample']} | {t['request_id'] or '-'} | {t['position']} | {t['token_id']} | "
                      + " | ".join("-" if t[k] is None else f"{t[k]:.6g}" for k in KINDS)
                      + " |" for t in p["worst_tokens"]]
    for kind, files in comparison["sources"].items():
        lines.append(f"- {kind} log-probs: {', '.join(f'`{f}`' for f in files)}")
    return lines


def _sharding_section(sharding: Mapping[str, Any] | None) -> list[str]:
    if not sharding:
        return []
    lines = ["", "## Sharded dumps (per-rank folders reassembled before comparing)", ""]
    for side in ("rollout", "train"):
        info = sharding.get(side) or {}
        groups = ", ".join(info.get("groups", ())) or "not reassembled (one unit per rank folder)"
        lines.append(f"- {side}: layout {info.get('layout', 'inferred')}; groups: {groups}")
        lines += [f"  - {f['kind']} at `{f['module']}` (rank(s) {', '.join(map(str, f['ranks']))}): {f['detail']}"
                  for f in info.get("findings", ())]
        lines += [f"  - {n}" for n in info.get("notes", ())]
    return lines


def _bullets(items: Sequence[str], empty: str = "none") -> str:
    return "\n".join(f"- {i}" for i in items) if items else f"- {empty}"


def render_markdown(report: RootCauseReport) -> str:
    d = report.to_dict()
    ctx, rc = d["context"], d["root_cause"]
    lines = ["# Consistency root-cause report", "", "## Context", ""]
    lines += [f"- {k}: {v}" for k, v in ctx.items()]
    lines += ["", "## Assumptions", "", _bullets(d["assumptions"])]
    lines += ["", "## Final judgement", "", f"- verdict: **{d['verdict']}**",
              f"- divergence: **{d['divergence']}** ({DIVERGENCE[d['divergence']]})"]
    if rc and rc["bucket"] in (AFTER_MODEL, DECODE_PATH, PRECISION):
        lines += [f"- root cause: **{rc['bucket']}** in the {rc['module']} ({rc['localisation']})",
                  f"- confidence: **{d['confidence']}**", f"- why: {rc['why']}"]
        if rc["bucket"] == PRECISION:
            lines.append(f"- dtypes: actor `{rc['dtypes']['actor']}`, rollout `{rc['dtypes']['rollout']}` in "
                         + ", ".join(f"`{m}`" for m in rc["modules"]))
    elif rc:
        lines += [
            f"- root cause: **{rc['bucket']}** at `{rc['module']}` (localised to `{rc['localisation']}`)",
            f"- train-side module(s): {', '.join(f'`{m}`' for m in rc.get('train_modules', [])) or 'n/a'}; "
            f"rollout-side module(s): {', '.join(f'`{m}`' for m in rc.get('rollout_modules', [])) or 'n/a'}"
            + (f"; diverging part(s) of the fused module: {', '.join(rc['divergent_parts'])}"
               if rc.get("divergent_parts") else ""),
            f"- confidence: **{d['confidence']}**",
            f"- why this is the first credible boundary: {rc['why']}",
            f"- previous aligned boundary: `{d['previous_aligned_boundary']}`",
        ]
        if rc.get("ranks"):
            lines.append(f"- rank(s): **{', '.join(map(str, rc['ranks']))}** — " + "; ".join(rc["rank_evidence"]))
    elif d["verdict"] == "no_divergence" and ctx.get("breached_metrics") and d["divergence"] == "aligned":
        lines.append(f"- every compared module is aligned and the recorded, recomputed and trainer log-probs agree, "
                     f"yet {', '.join(ctx['breached_metrics'])} breached in the run: this window does not reproduce "
                     "the breach")
    elif d["verdict"] == "no_divergence" and ctx.get("breached_metrics"):
        unchecked = (d["logprob_comparison"] or {}).get("pairs", [{}])[0].get("detail") or NOT_PROVIDED
        lines.append(f"- inferred, not observed ({unchecked}):")
        lines.append(f"- every compared module is aligned within the dtype-aware thresholds, yet "
                     f"{', '.join(ctx['breached_metrics'])} breached in the run: the divergence is **after the "
                     "model** (sampling path: temperature, top-p/top-k, logits processors, log-prob gathering)")
    elif d["verdict"] == "no_divergence":
        lines.append("- every compared module is aligned within the dtype-aware thresholds; no root cause to report")
    else:
        lines.append("- no root cause is claimed: the analysis cannot conclude")
        lines += [
            f"- **{c['reason']}**: {c['detail']} (evidence: {', '.join(c['evidence']) or 'n/a'})"
            for c in d["cannot_conclude"]
        ]
    lines += _logprob_section(d["logprob_comparison"])
    lines += _sharding_section(d["sharding"])
    lines += ["", "## Evidence chain", "", _bullets(d["evidence_chain"])]
    lines += ["", "## Key suspects", ""]
    lines += [
        f"- `{s['module']}`: {s['bucket']} (output {s['output']}, parameters {s['parameters']}, inputs {s['inputs']}; "
        f"{s['evidence']}) — output: {s['output_detail']}; parameters: {s['parameter_detail']}"
        for s in d["suspects"]
    ] or ["- none"]
    lines += ["", "## Excluded candidates", ""]
    lines += [f"- `{e['module']}`: {e['reason']}" for e in d["excluded_candidates"]] or ["- none"]
    lines += ["", "## Hypothesis", ""]
    if d["hypothesis"]:
        lines += [
            f"- expected train path: {d['hypothesis']['expected_train_path']}",
            f"- inference path: {d['hypothesis']['inference_path']}",
        ]
    else:
        lines.append("- none (no root cause claimed)")
    lines += ["", "## Next checks", "", _bullets(d["next_checks"])]
    lines += ["", "## Steps executed / verified / not run", ""]
    lines += [f"- {s['step']}: **{s['status']}** — {s['detail']}" for s in d["steps"]]
    lines += ["", "## Limitations", "", _bullets(d["limitations"])]
    lines += ["", "## Notes and paths", ""]
    for key, value in d["paths"].items():
        if isinstance(value, dict):
            lines += [f"- {key}:"] + [f"  - {k}: `{v}`" for k, v in value.items()]
        else:
            lines.append(f"- {key}: `{value}`")
    return "\n".join(lines) + "\n"
