"""Orchestrate the analysis: sides present → pairing → mapping → comparison → classification →
judgement → artifacts. Every step that did not run is reported as not run, never as passed."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.consistency.classify import (
    Boundary,
    ModuleAnalysis,
    classify_modules,
    find_boundary,
)
from autotest.consistency.config import MANIFEST
from autotest.consistency.correlation import ForwardRecord
from autotest.consistency.dumps import parse_key, read_dump
from autotest.consistency.logprob_compare import load_comparison
from autotest.consistency.logprob_verdict import with_logprob_finding
from autotest.consistency.precision import dtype_differences, with_precision_finding
from autotest.consistency.mapping import MappingGroup, load_user_mapping, map_modules
from autotest.consistency.pairing import CannotConclude, ForwardPair
from autotest.consistency.report import output_paths, write_outputs
from autotest.consistency.layout import SideLayout
from autotest.consistency.sharding import assemble_both, keep_record, peer_requests, with_sharding
from autotest.consistency.sources import resolve_inputs
from autotest.consistency.value_compare import GroupCompare, compare_group
from autotest.consistency.verdict import (
    RootCauseReport,
    Step,
    after_model_checks,
    hypothesis_for,
    judge,
    localisation,
    next_checks_for,
    suspect_row,
)
from autotest.errors import UsageError
from autotest.files import require_folder

_WHY = {
    "parameter_sync_mismatch": (
        "its parameters differ between the sides (compared directly, so no upstream noise can explain them)"
    ),
    "module_impl_mismatch": "its inputs and parameters are aligned, yet its output diverges",
    "systemic_misalignment": "its inputs already differ and no earlier dumped module diverges",
    "upstream_propagation_or_amplification": "a marginal input difference becomes a divergent output here",
}


def analyze_dumps(
    train_dump: Path,
    rollout_dump: Path,
    out_dir: Path,
    *,
    train_correlation: Path | None = None,
    rollout_correlation: Path | None = None,
    mapping_file: Path | None = None,
    step: int | None = None,
    strict: bool = False,
    wrapper_path: Path | None = None,
    context: Mapping[str, Any] | None = None,
    use_tensors: bool = True,
    logprobs: Sequence[Path] | None = None,
    layouts: Mapping[str, SideLayout] | None = None,
) -> RootCauseReport:
    """Analyse one diagnostic window and write output_1 … output_5 into ``out_dir``.

    The dumps may come from the consistency job or from any framework (layouts: :mod:`.sources`).
    ``strict`` (``consistency analyze``): unusable inputs — a missing or empty folder, mismatched
    steps, nothing to pair, no module in common — raise a one-line UsageError; otherwise they are
    reported as "cannot conclude". ``context`` adds caller facts to the report (e.g. the screening
    result); ``wrapper_path`` is the diagnostic wrapper the dumps came from. ``logprobs``: per-token
    log-prob record files or folders (:mod:`.logprob_records`) for the three-way comparison
    (recorded while sampling / rollout recompute / trainer); without them the sampling path is unchecked.
    ``layouts`` (``train`` / ``rollout``): each side's parallel layout; per-rank dumps of a tensor- or
    pipeline-parallel side are reassembled first (:mod:`.sharding`), with the layout inferred where not given.
    """
    actor_dump_dir, rollout_dump_dir, out_dir = Path(train_dump), Path(rollout_dump), Path(out_dir)
    if rollout_dump_dir.resolve() == actor_dump_dir.resolve():
        raise UsageError(f"{rollout_dump_dir}: the rollout and train dump folders are the same; pass one per side")
    require_folder(out_dir, "the analysis output folder (--out)")
    user_rules = load_user_mapping(Path(mapping_file)) if mapping_file else ()
    context = dict(context or {})
    paths: dict[str, Any] = {
        "wrapper": str(wrapper_path) if wrapper_path else "not provided",
        "rollout_dump": str(rollout_dump_dir),
        "actor_dump": str(actor_dump_dir),
        "rollout_correlation_log": str(rollout_correlation) if rollout_correlation else "not provided",
        "actor_correlation_log": str(train_correlation) if train_correlation else "not provided",
        "mapping_file": str(mapping_file) if mapping_file else "built-in rules only",
        "outputs": output_paths(out_dir),
    }
    steps: list[Step] = [
        Step("screening (previous run metrics)", "executed", json.dumps(context["screening"], default=str))
        if "screening" in context
        else Step(
            "screening (previous run metrics)", "not_run", "not part of analyze(); no screening result was passed in"
        )
    ]
    sharding = assemble_both(actor_dump_dir, rollout_dump_dir, out_dir, layouts or {}, step, strict, use_tensors)
    inputs = resolve_inputs(sharding.train.root, sharding.rollout.root, _path(train_correlation),
                            _path(rollout_correlation), step, strict, partial(keep_record, sharding))
    steps += inputs.steps
    issues: list[CannotConclude] = list(inputs.issues)
    records, pairs = inputs.records, inputs.pairs

    groups_by_pair: dict[str, tuple[MappingGroup, ...]] = {}
    compares: dict[str, list[GroupCompare]] = {}
    analyses: dict[str, tuple[ModuleAnalysis, ...]] = {}
    boundaries: dict[str, Boundary | None] = {}
    tensor_data = False
    for pair in pairs:
        rdump, adump = read_dump(pair.rollout_dump), read_dump(pair.actor_dump)
        tensor_data = tensor_data or (use_tensors and rdump.has_tensor_data() and adump.has_tensor_data())
        groups = map_modules(adump.entries, rdump.entries, user_rules)
        if not any(g.comparable for g in groups):
            if strict and len(pairs) == 1:
                raise UsageError(_no_common_modules(adump, rdump))
            issues.append(
                CannotConclude(
                    "no_comparable_modules",
                    f"pair {pair.pair_id}: none of {len(adump.entries)} actor modules maps onto "
                    f"the {len(rdump.entries)} rollout modules",
                    (str(adump.root), str(rdump.root)),
                )
            )
            continue
        groups_by_pair[pair.pair_id] = groups
        compares[pair.pair_id] = [
            compare_group(g, adump.entries, rdump.entries, use_tensors) for g in groups if g.train_keys
        ]
        analyses[pair.pair_id] = classify_modules(compares[pair.pair_id])
        boundaries[pair.pair_id] = find_boundary(analyses[pair.pair_id])
    analysed = [p for p in pairs if p.pair_id in analyses]
    if strict and pairs and not analysed:
        raise UsageError(_no_common_modules(read_dump(pairs[0].actor_dump), read_dump(pairs[0].rollout_dump)))

    ran = bool(analysed)
    if ran:
        kinds = Counter(g.kind for g in groups_by_pair[analysed[0].pair_id])
        steps.append(Step("module mapping", "executed", ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))))
        steps.append(
            Step(
                "value comparison (statistics)",
                "executed",
                f"{sum(len(c) for c in compares.values())} module group comparison(s) over {len(analysed)} pair(s)",
            )
        )
        steps.append(
            Step("value comparison (tensor, elementwise)", "executed", "tensors loaded from dump_tensor_data")
            if tensor_data
            else Step(
                "value comparison (tensor, elementwise)", "not_run", "task statistics dumps: no tensors to compare"
            )
        )
        steps.append(Step("module classification and boundary", "executed", f"{len(analysed)} pair(s)"))
    else:
        for name in (
            "module mapping",
            "value comparison (statistics)",
            "value comparison (tensor, elementwise)",
            "module classification and boundary",
        ):
            steps.append(Step(name, "not_run", "no usable forward pair"))

    mapping_conf = {c.module_path: c.group.confidence for pid in analyses for c in compares[pid]}
    verdict, confidence, module, pair, judge_notes = judge(analysed, analyses, boundaries, issues, mapping_conf)
    if verdict == "cannot_conclude" and not issues:
        issues.append(CannotConclude("no_comparable_modules", "no compared module has a comparable output"))
    steps.append(Step("root-cause judgement", "executed" if ran else "not_run", verdict))

    report_pair = pair or (analysed[0] if analysed else None)
    boundary = boundaries.get(pair.pair_id) if pair else None
    report = RootCauseReport(
        verdict=verdict,
        confidence=confidence,
        root_cause=_root_cause(module, boundary, pair) if module and boundary and pair else None,
        previous_aligned_boundary=boundary.previous_aligned.module_path
        if boundary and boundary.previous_aligned
        else None,
        suspects=tuple(suspect_row(s, pair) for s in boundary.suspects) if boundary and pair else (),
        excluded=_excluded(analyses[report_pair.pair_id]) if report_pair else (),
        hypothesis=hypothesis_for(module) if module else None,
        evidence_chain=tuple(_evidence(report_pair, analyses.get(report_pair.pair_id, ()), boundary, len(analysed)))
        if report_pair
        else tuple(f"{i.reason}: {i.detail} ({', '.join(i.evidence)})" for i in issues),
        next_checks=tuple(next_checks_for(module, boundary, pair, tensor_data))
        if module
        else tuple(after_model_checks(context["breached_metrics"]))
        if verdict == "no_divergence" and context.get("breached_metrics")
        else tuple(_fix_checks(issues)),
        limitations=tuple(_limitations(tensor_data, issues, groups_by_pair, judge_notes, analysed)),
        cannot_conclude=tuple(issues),
        steps=tuple(steps),
        context=_context(context, records, analysed, tensor_data, rollout_dump_dir, actor_dump_dir),
        paths=paths,
        assumptions=inputs.assumptions + tuple(_mapping_assumptions(groups_by_pair)),
    )
    comparison, status, detail = load_comparison(logprobs, strict)
    report = with_logprob_finding(report, comparison, Step("three-way log-prob comparison", status, detail),
                                  context.get("breached_metrics") or ())
    pid = report_pair.pair_id if report_pair else None
    report = with_precision_finding(report, dtype_differences(compares.get(pid, ()) if pid else ()),
                                    len(compares.get(pid, ())) if pid else 0,
                                    {side: [r.autocast for r in recs if r.autocast] for side, recs in records.items()})
    report = with_sharding(report, sharding, report_pair.rollout_dump if report_pair else None,
                           report_pair.actor_dump if report_pair else None, peer_requests(sharding, records))
    try:
        write_outputs(
            out_dir,
            groups_by_pair.get(pid, ()) if pid else (),
            {p: compares[p] for p in compares},
            analyses,
            report,
        )
    except OSError as exc:
        raise UsageError(f"{exc.filename or out_dir}: cannot write the analysis ({exc.strerror}); "
                         "pass a writable --out folder") from None
    return report


def _path(value: Path | str | None) -> Path | None:
    return Path(value) if value is not None else None


def _no_common_modules(train: Any, rollout: Any) -> str:
    t = [e.path for e in train.entries.values()][:2]
    r = [e.path for e in rollout.entries.values()][:2]
    return (f"{train.root}: no common modules: none of the {len(train.entries)} train modules (e.g. {', '.join(t)}) "
            f"maps onto the {len(rollout.entries)} rollout modules in {rollout.root} (e.g. {', '.join(r)}); "
            "pass --mapping FILE (rules: train regex -> rollout name)")


def _mapping_assumptions(groups: Mapping[str, tuple[MappingGroup, ...]]) -> list[str]:
    kinds = {g.kind for gs in groups.values() for g in gs}
    notes = []
    if "rename" in kinds:
        notes.append("module names matched by known renames (Megatron decoder.layers / self_attention / linear_* "
                     "to HF / engine names): the renamed modules are assumed to compute the same thing")
    if "fused" in kinds:
        notes.append("fused engine modules (qkv_proj, gate_up_proj) are assumed to concatenate their parts in "
                     "the order q, k, v / gate, up along the output dim (vLLM/SGLang layout, one tensor-parallel "
                     "shard)")
    if "engine_class" in kinds or "class_differs" in kinds:
        notes.append("modules with the same path but another class (engine kernels) are assumed to implement "
                     "the same layer")
    return notes


def _root_cause(module: ModuleAnalysis, boundary: Boundary, pair: ForwardPair) -> dict[str, Any]:
    prev = boundary.previous_aligned
    why = (
        f"{module.module_path} is the first module in forward completion order that diverges on its own: "
        f"{_WHY.get(module.bucket, module.bucket)} "
        f"(output {module.output}, parameters {module.parameters}, inputs {module.inputs})"
        + (
            f"; the last aligned module before it is {prev.module_path}"
            if prev
            else "; no aligned module precedes it in the dump"
        )
        + "".join(f"; {n}" for n in module.notes if n not in module.compare.group.notes)
    )
    return {
        "module": module.module_path,
        "bucket": module.bucket,
        "localisation": localisation([s.module_path for s in boundary.suspects if s.bucket == module.bucket]),
        "train_keys": list(module.compare.group.train_keys),
        "rollout_keys": list(module.compare.group.rollout_keys),
        "train_modules": [_key_path(k) for k in module.compare.group.train_keys],
        "rollout_modules": [_key_path(k) for k in module.compare.group.rollout_keys],
        "divergent_parts": list(module.compare.divergent_parts),
        "evidence": module.compare.evidence(),
        "pair": pair.pair_id,
        "why": why,
    }


def _key_path(key: str) -> str:
    parsed = parse_key(key)
    return parsed[0] if parsed else key


def _excluded(analyses: tuple[ModuleAnalysis, ...], limit: int = 30) -> tuple[dict[str, Any], ...]:
    rows = []
    for a in analyses:
        if a.bucket == "upstream_propagation_or_amplification" and not a.amplification:
            rows.append({"module": a.module_path, "reason": f"difference propagated from {a.explained_by}"})
        elif a.bucket == "insufficient_output_evidence":
            rows.append({"module": a.module_path, "reason": "no comparable output: " + "; ".join(a.notes)})
    if len(rows) > limit:
        rows = rows[:limit] + [{"module": "...", "reason": f"{len(rows) - limit} more in output_4_module_analysis"}]
    return tuple(rows)


def _evidence(
    pair: ForwardPair, analyses: tuple[ModuleAnalysis, ...], boundary: Boundary | None, num_pairs: int
) -> list[str]:
    if pair.rollout is not None and pair.actor is not None:
        pairing = (
            f"pairing: {num_pairs} forward pair(s); reported pair {pair.pair_id} holds {len(pair.request_ids)} "
            f"request(s) ({', '.join(pair.request_ids[:4])}{', ...' if len(pair.request_ids) > 4 else ''}) with "
            f"identical token ids and weight version {pair.weight_version} (where logged) "
            f"({pair.rollout.log_path}:{pair.rollout.line}, {pair.actor.log_path}:{pair.actor.line})"
        )
    else:
        pairing = f"pairing: {pair.pair_id} by assumption (no correlation logs; see Assumptions)"
    chain = [pairing, f"dumps: actor {pair.actor_dump}/dump.json, rollout {pair.rollout_dump}/dump.json"]
    if boundary is None:
        levels = Counter(a.output for a in analyses)
        chain.append(
            f"{len(analyses)} module(s) compared, outputs {dict(sorted(levels.items()))}; none diverges credibly"
        )
        return chain
    if boundary.previous_aligned is not None:
        p = boundary.previous_aligned
        chain.append(
            f"previous aligned boundary {p.module_path}: "
            f"output {p.output}, parameters {p.parameters}, inputs {p.inputs}"
        )
    row = suspect_row(boundary.module, pair)
    chain.append(
        f"first divergence {row['module']} ({row['bucket']}): output {row['output_detail']}; "
        f"parameters {row['parameter_detail']}; inputs {row['inputs']}"
    )
    for s in boundary.suspects[1:6]:
        chain.append(
            f"also {s.bucket}: {s.module_path} (output {s.output}, parameters {s.parameters}, inputs {s.inputs})"
        )
    if boundary.explained:
        chain.append(
            f"{len(boundary.explained)} later module(s) diverge only by propagation (output_4_module_analysis)"
        )
    return chain


def _fix_checks(issues: list[CannotConclude]) -> list[str]:
    fixes = {
        "missing_dump_side": (
            "Rerun the diagnostic window so that both sides dump (check the observer config and MSProbe step list)."
        ),
        "missing_correlation_log": "Rerun with the diagnostic config so that both correlation logs are written.",
        "unpaired_samples": (
            "Make the rollout forward and the actor recompute cover the same requests in the same micro-batches "
            "(micro_batch_size in the diagnostic config)."
        ),
        "token_ids_differ": (
            "Find where the actor's token ids diverge from the rollout's (detokenise/retokenise, truncation, padding) "
            "before comparing modules."
        ),
        "weight_version_mismatch": (
            "Dump a window where both sides run the same weight version (after the weight sync of that step)."
        ),
        "no_comparable_modules": (
            "Provide a mapping file (YAML/JSON, see autotest.consistency.mapping) that maps the actor module names "
            "onto the rollout ones."
        ),
    }
    return [fixes[r] for r in dict.fromkeys(i.reason for i in issues)]


def _limitations(
    tensor_data: bool,
    issues: list[CannotConclude],
    groups: Mapping[str, tuple[MappingGroup, ...]],
    judge_notes: list[str],
    pairs: list[ForwardPair],
) -> list[str]:
    notes = list(judge_notes)
    if pairs and not tensor_data:
        notes.append("statistics only (task statistics): they screen; elementwise conclusions need the tensor pass")
    if any(g.kind == "fused" for gs in groups.values() for g in gs):
        notes.append("fused module groups: statistics are combined over the parts; only tensor dumps split the "
                     "fused output and weight by layout for an elementwise comparison per part")
    if pairs:
        notes.append("module statistics cover a whole forward batch, not a single request")
    notes.append("forward pass only; level L0 attributes code between submodules to the enclosing module")
    notes += [f"{i.reason}: {i.detail}" for i in issues]
    return notes


def _context(
    extra: Mapping[str, Any],
    records: Mapping[str, tuple[ForwardRecord, ...]],
    pairs: list[ForwardPair],
    tensor_data: bool,
    rollout_dump_dir: Path,
    actor_dump_dir: Path,
) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        "window_steps": sorted({r.step for recs in records.values() for r in recs}),
        "forwards": {side: len(recs) for side, recs in records.items()},
        "paired_forwards": len(pairs),
        "paired_requests": sum(len(p.request_ids) for p in pairs),
        "weight_versions": sorted({p.weight_version for p in pairs if p.weight_version is not None}),
        "tasks": sorted({r.task for recs in records.values() for r in recs}),
        "evidence": "tensor" if tensor_data else "statistics",
    }
    # The observer's manifests sit in its output_dir, two levels above the default dump roots.
    pattern = MANIFEST.format(pid="*")
    for root in (rollout_dump_dir.parent.parent, actor_dump_dir.parent.parent, rollout_dump_dir.parent):
        manifests = sorted(root.glob(pattern)) if root.is_dir() else []
        if manifests:
            ctx["msprobe_version"] = json.loads(manifests[0].read_text(encoding="utf-8")).get("msprobe_version")
            break
    ctx.update({k: v for k, v in extra.items() if k != "screening"})
    if "screening" in extra:
        ctx["screening"] = extra["screening"]
    return ctx
