"""The report's account of one analysis, in words: why the root cause is the first credible boundary, the evidence
chain, the candidates excluded, what to fix when it cannot conclude, the limitations and the mapping's assumptions.
:func:`autotest.consistency.analyze.analyze_dumps` computes; this module only phrases."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from autotest.consistency.classify import Boundary, ModuleAnalysis
from autotest.consistency.dumps import parse_key
from autotest.consistency.mapping import MappingGroup
from autotest.consistency.pairing import CannotConclude, ForwardPair, stale_sync_line
from autotest.consistency.verdict import localisation, suspect_row

WHY = {
    "parameter_sync_mismatch": (
        "its parameters differ between the sides (compared directly, so no upstream noise can explain them)"
    ),
    "module_impl_mismatch": "its inputs and parameters are aligned, yet its output diverges",
    "systemic_misalignment": "its inputs already differ and no earlier dumped module diverges",
    "upstream_propagation_or_amplification": "a marginal input difference becomes a divergent output here",
}


def mapping_assumptions(groups: Mapping[str, tuple[MappingGroup, ...]]) -> list[str]:
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


def root_cause(module: ModuleAnalysis, boundary: Boundary, pair: ForwardPair) -> dict[str, Any]:
    prev = boundary.previous_aligned
    why = (
        f"{module.module_path} is the first module in forward completion order that diverges on its own: "
        f"{WHY.get(module.bucket, module.bucket)} "
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
        "train_modules": [key_path(k) for k in module.compare.group.train_keys],
        "rollout_modules": [key_path(k) for k in module.compare.group.rollout_keys],
        "divergent_parts": list(module.compare.divergent_parts),
        "evidence": module.compare.evidence(),
        "pair": pair.pair_id,
        "why": why,
        # the trainer's weights are the source a sync copies from: the side holding others is the rollout's
        **({"side": "rollout"} if module.bucket == "parameter_sync_mismatch" else {}),
    }


def key_path(key: str) -> str:
    parsed = parse_key(key)
    return parsed[0] if parsed else key


def excluded(analyses: tuple[ModuleAnalysis, ...], limit: int = 30) -> tuple[dict[str, Any], ...]:
    rows = []
    for a in analyses:
        if a.bucket == "upstream_propagation_or_amplification" and not a.amplification:
            rows.append({"module": a.module_path, "reason": f"difference propagated from {a.explained_by}"})
        elif a.bucket == "insufficient_output_evidence":
            rows.append({"module": a.module_path, "reason": "no comparable output: " + "; ".join(a.notes)})
    if len(rows) > limit:
        rows = rows[:limit] + [{"module": "...", "reason": f"{len(rows) - limit} more in output_4_module_analysis"}]
    return tuple(rows)


def evidence(
    pair: ForwardPair, analyses: tuple[ModuleAnalysis, ...], boundary: Boundary | None, num_pairs: int
) -> list[str]:
    if pair.rollout is not None and pair.actor is not None:
        pairing = (
            f"pairing: {num_pairs} forward pair(s); reported pair {pair.pair_id} holds {len(pair.request_ids)} "
            f"request(s) ({', '.join(pair.request_ids[:4])}{', ...' if len(pair.request_ids) > 4 else ''}) with "
            f"identical token ids and batch weight version {pair.weight_version} (where logged) "
            f"({pair.rollout.log_path}:{pair.rollout.line}, {pair.actor.log_path}:{pair.actor.line})"
        )
    else:
        pairing = f"pairing: {pair.pair_id} by assumption (no correlation logs; see Assumptions)"
    chain = [pairing, f"dumps: actor {pair.actor_dump}/dump.json, rollout {pair.rollout_dump}/dump.json"]
    stale = stale_sync_line(pair)
    if stale is not None:  # from each side's own held version, whatever the modules show
        chain.insert(1, f"weights: {stale}")
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


def fix_checks(issues: list[CannotConclude]) -> list[str]:
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


def limitations(
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
