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
from autotest.consistency.dumps import read_dump
from autotest.consistency.logprob_compare import load_comparison
from autotest.consistency.logprob_verdict import with_logprob_finding
from autotest.consistency.precision import dtype_differences, with_precision_finding
from autotest.consistency.mapping import MappingGroup, load_user_mapping, map_modules
from autotest.consistency.pairing import CannotConclude, ForwardPair, stale_sync_line
from autotest.consistency.report import output_paths, write_outputs
from autotest.consistency.explain import (
    evidence,
    excluded,
    fix_checks,
    limitations,
    mapping_assumptions,
    root_cause,
)
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
    next_checks_for,
    suspect_row,
)
from autotest.errors import UsageError
from autotest.files import require_folder

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
    stale = [p for p in analysed if p.stale_by is not None]
    if stale and (report_pair is None or report_pair.stale_by is None):  # the reported pair's own line says it
        judge_notes.append(f"{len(stale)} of {len(analysed)} forward pair(s) ran stale weights; first: "
                           f"{stale_sync_line(stale[0])}")
    boundary = boundaries.get(pair.pair_id) if pair else None
    report = RootCauseReport(
        verdict=verdict,
        confidence=confidence,
        root_cause=root_cause(module, boundary, pair) if module and boundary and pair else None,
        previous_aligned_boundary=boundary.previous_aligned.module_path
        if boundary and boundary.previous_aligned
        else None,
        suspects=tuple(suspect_row(s, pair) for s in boundary.suspects) if boundary and pair else (),
        excluded=excluded(analyses[report_pair.pair_id]) if report_pair else (),
        hypothesis=hypothesis_for(module, pair) if module else None,
        evidence_chain=tuple(evidence(report_pair, analyses.get(report_pair.pair_id, ()), boundary, len(analysed)))
        if report_pair
        else tuple(f"{i.reason}: {i.detail} ({', '.join(i.evidence)})" for i in issues),
        next_checks=tuple(next_checks_for(module, boundary, pair, tensor_data))
        if module
        else tuple(after_model_checks(context["breached_metrics"]))
        if verdict == "no_divergence" and context.get("breached_metrics")
        else tuple(fix_checks(issues)),
        limitations=tuple(limitations(tensor_data, issues, groups_by_pair, judge_notes, analysed)),
        cannot_conclude=tuple(issues),
        steps=tuple(steps),
        context=_context(context, records, analysed, tensor_data, rollout_dump_dir, actor_dump_dir),
        paths=paths,
        assumptions=inputs.assumptions + tuple(mapping_assumptions(groups_by_pair)),
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
