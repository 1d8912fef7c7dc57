"""The root-cause judgement: one typed result from pairing, comparison and classification.

Verdicts: ``root_cause_found`` (a credible first divergence boundary, or the rollout's sampling
path when its recorded log-probs differ from its own model's recompute), ``no_divergence``
(every compared module aligned), ``cannot_conclude`` (typed reasons; no root cause is ever
claimed then). ``divergence`` (:mod:`autotest.consistency.logprob_verdict`, which completes the module
judgement with the log-prob comparison) classifies where: ``sampling_path``, ``module``,
``sampling_path_and_module``, ``aligned``, ``sampling_path_unchecked`` (modules aligned, no recorded log-probs)
or ``undetermined``. Confidence: ``high`` needs elementwise (tensor) evidence at the boundary, a
high-confidence mapping and clean pairing; statistics alone give at most ``medium``; pairing
issues or a low-confidence mapping give ``low``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotest.consistency.classify import Boundary, ModuleAnalysis
from autotest.consistency.pairing import CannotConclude, ForwardPair, stale_sync_line
from autotest.consistency.value_compare import TensorCompare

VERDICTS = ("root_cause_found", "no_divergence", "cannot_conclude")
STEP_STATUSES = ("verified", "executed", "not_run", "failed")


@dataclass(frozen=True)
class Step:
    """One step of the consistency job and what was really done."""

    name: str
    status: str
    """verified (checked against files) | executed | not_run | failed."""
    detail: str


@dataclass(frozen=True)
class RootCauseReport:
    """Everything output_5 says; report.py only renders it."""

    verdict: str
    confidence: str | None
    root_cause: Mapping[str, Any] | None
    previous_aligned_boundary: str | None
    suspects: tuple[Mapping[str, Any], ...]
    excluded: tuple[Mapping[str, Any], ...]
    hypothesis: Mapping[str, str] | None
    evidence_chain: tuple[str, ...]
    next_checks: tuple[str, ...]
    limitations: tuple[str, ...]
    cannot_conclude: tuple[CannotConclude, ...]
    steps: tuple[Step, ...]
    context: Mapping[str, Any]
    paths: Mapping[str, Any] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    """What the analysis took on trust (pairing without logs, step choice, name mapping, fused layout)."""
    divergence: str = "undetermined"
    """Where the sides diverge (:func:`classify_divergence`)."""
    logprobs: Mapping[str, Any] | None = None
    """The three-way log-prob comparison (:mod:`.logprob_compare`), as a dict."""
    sharding: Mapping[str, Any] | None = None
    """Per side: the rank groups reassembled, their findings and the ranks blamed (:mod:`.sharding`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "verdict": self.verdict,
            "divergence": self.divergence,
            "confidence": self.confidence,
            "root_cause": dict(self.root_cause) if self.root_cause else None,
            "previous_aligned_boundary": self.previous_aligned_boundary,
            "suspects": [dict(s) for s in self.suspects],
            "excluded_candidates": [dict(e) for e in self.excluded],
            "hypothesis": dict(self.hypothesis) if self.hypothesis else None,
            "evidence_chain": list(self.evidence_chain),
            "next_checks": list(self.next_checks),
            "limitations": list(self.limitations),
            "cannot_conclude": [c.to_dict() for c in self.cannot_conclude],
            "steps": [{"step": s.name, "status": s.status, "detail": s.detail} for s in self.steps],
            "context": dict(self.context),
            "assumptions": list(self.assumptions),
            "paths": dict(self.paths),
            "logprob_comparison": dict(self.logprobs) if self.logprobs else None,
            "sharding": dict(self.sharding) if self.sharding else None,
        }


def _worst(module: ModuleAnalysis, component: str) -> TensorCompare | None:
    found = [t for t in module.compare.tensors if t.component == component]
    if not found:
        return None
    return max(found, key=lambda t: (t.status == "alert", max((v or 0.0) for v in t.stat_rel_err.values())))


def _describe(t: TensorCompare | None) -> str:
    if t is None:
        return "no tensors"
    if t.tensor is not None:
        m = t.tensor
        return (
            f"{t.path}: cosine {m.cosine:.6f}, rel_err {m.rel_err:.3e}, max_abs_err {m.max_abs_err:.3e} "
            f"({t.status}, tensor)"
        )
    errs = ", ".join(f"{s} {v:.3e}" for s, v in t.stat_rel_err.items() if v is not None)
    return f"{t.path}: rel_err {errs} ({t.status}, statistics)"


def suspect_row(m: ModuleAnalysis, pair: ForwardPair) -> dict[str, Any]:
    return {
        "module": m.module_path,
        "bucket": m.bucket,
        "train_keys": list(m.compare.group.train_keys),
        "rollout_keys": list(m.compare.group.rollout_keys),
        "output": m.output,
        "parameters": m.parameters,
        "inputs": m.inputs,
        "evidence": m.compare.evidence(),
        "output_detail": _describe(_worst(m, "output")),
        "parameter_detail": _describe(_worst(m, "parameter")),
        "notes": list(m.notes),
        "pair": pair.pair_id,
    }


def localisation(paths: Sequence[str]) -> str:
    """The deepest module path enclosing every suspect (``model.layers.1.mlp``)."""
    parts = [p.split(".") for p in paths]
    common = os.path.commonprefix(parts)
    return ".".join(common) if common else "(whole model)"


def judge(
    pairs: Sequence[ForwardPair],
    analyses: Mapping[str, tuple[ModuleAnalysis, ...]],
    boundaries: Mapping[str, Boundary | None],
    issues: Sequence[CannotConclude],
    mapping_confidence: Mapping[str, str],
) -> tuple[str, str | None, ModuleAnalysis | None, ForwardPair | None, list[str]]:
    """(verdict, confidence, boundary module, its pair, notes) across all pairs."""
    notes: list[str] = []
    if not pairs:
        return "cannot_conclude", None, None, None, notes
    found = {pid: b for pid, b in boundaries.items() if b is not None}
    if not found:
        if any(a.output in ("unknown", "none") for mods in analyses.values() for a in mods) and not any(
            a.output == "aligned" for mods in analyses.values() for a in mods
        ):
            return "cannot_conclude", None, None, None, notes
        return "no_divergence", None, None, None, notes
    votes = Counter(b.module.module_path for b in found.values())
    path, count = votes.most_common(1)[0]
    pair = next(p for p in pairs if found.get(p.pair_id) and found[p.pair_id].module.module_path == path)  # type: ignore[union-attr]
    boundary = found[pair.pair_id]
    assert boundary is not None
    module = boundary.module
    if count < len(pairs):
        notes.append(f"{count} of {len(pairs)} forward pairs place the first divergence at {path}")
    evidence = module.compare.evidence()
    group_conf = mapping_confidence.get(module.module_path, "medium")
    if issues or group_conf == "low" or module.bucket == "systemic_misalignment":
        confidence = "low"
    elif evidence == "tensor" and group_conf == "high" and count == len(pairs):
        confidence = "high"
    else:
        confidence = "medium"
    return "root_cause_found", confidence, module, pair, notes


HYPOTHESES = {
    "parameter_sync_mismatch": (
        "{m} computes with the actor's current weights ({pt}).",
        "The rollout engine's {m} holds different weights ({pr}): the weight sync to the inference engine "
        "skipped, truncated or mis-mapped this module (or it was loaded from a stale version).",
    ),
    "module_impl_mismatch": (
        "{m} ({tc}) maps the aligned inputs and weights to its output ({ot}).",
        "The inference implementation of {m} ({rc}) computes a different function of the same inputs and "
        "weights ({orr}): epsilon, activation, kernel, fused operator or precision handling differ.",
    ),
    "systemic_misalignment": (
        "The first dumped module receives the actor's inputs.",
        "The rollout side's inputs already differ before the first dumped module: different model inputs "
        "(token ids, positions, mask) or a dump narrowed past the real boundary.",
    ),
    "upstream_propagation_or_amplification": (
        "{m} receives inputs that differ only marginally ({it}).",
        "The inference path of {m} amplifies that difference to a divergent output ({orr}): a numerically "
        "sensitive operation in lower precision.",
    ),
}


def hypothesis_for(module: ModuleAnalysis, pair: ForwardPair | None = None) -> dict[str, str]:
    out_t, par_t, in_t = _worst(module, "output"), _worst(module, "parameter"), _worst(module, "input")
    group = module.compare.group
    fields = {
        "m": module.module_path,
        "tc": ",".join(k.split(".")[-3] for k in group.train_keys),
        "rc": ",".join(k.split(".")[-3] for k in group.rollout_keys),
        "pt": _stat(par_t, "train"),
        "pr": _stat(par_t, "rollout"),
        "ot": _stat(out_t, "train"),
        "orr": _stat(out_t, "rollout"),
        "it": _describe(in_t),
    }
    train, inference = HYPOTHESES[module.bucket if module.bucket in HYPOTHESES else "module_impl_mismatch"]
    stale = stale_sync_line(pair) if pair is not None else None
    if stale is not None:  # each side's own held version says which sync went wrong: name it, with N
        inference = (f"The rollout engine's {{m}} holds different weights ({{pr}}): {stale}."
                     if module.bucket == "parameter_sync_mismatch" else f"{inference} Besides, {stale}.")
    elif (module.bucket == "parameter_sync_mismatch" and pair is not None and pair.rollout and pair.actor
          and pair.rollout.held_weight_version is not None
          and pair.rollout.held_weight_version == pair.actor.held_weight_version):
        inference = inference.replace(
            "(or it was loaded from a stale version)",
            f"(not a stale sync: both sides held weight version {pair.actor.held_weight_version})")
    return {"expected_train_path": train.format(**fields), "inference_path": inference.format(**fields)}


def _stat(t: TensorCompare | None, side: str) -> str:
    if t is None:
        return "no tensors dumped"
    s = t.train if side == "train" else t.rollout
    norm = s.stats.get("Norm")
    return f"{t.path} {s.dtype} Norm {norm:.6g}" if norm is not None else f"{t.path} {s.dtype}"


#: where a divergence lives when every module agrees but the run's train/inference metric breached
AFTER_MODEL_CHECKS = (
    "Check the rollout's sampling path, after the model: sampling temperature (and that the reported log-probs "
    "use the same temperature as the trainer), top-p/top-k, logits processors (penalties, masks, bias), and how "
    "the log-probs of the sampled tokens are gathered and returned.",
    "Compare, per token in the window, the log-probs the rollout recorded while sampling with a prefill "
    "recompute by the rollout model itself: a difference there confirms the sampling path; the dumps cover "
    "only the model's forward.",
)


def after_model_checks(breached: Sequence[str]) -> list[str]:
    """Next checks when the dumps align although ``breached`` (consistency metrics) breached in the run."""
    return [f"{', '.join(breached)} breached while every dumped module is aligned: the divergence is after the "
            "model (sampling / log-prob post-processing), not in a module.", *AFTER_MODEL_CHECKS]


def next_checks_for(
    module: ModuleAnalysis | None,
    boundary: Boundary | None,
    pair: ForwardPair | None,
    tensor_evidence: bool,
) -> list[str]:
    checks: list[str] = []
    if module is not None and boundary is not None and pair is not None:
        m = module.module_path
        if module.bucket == "parameter_sync_mismatch":
            where = localisation([s.module_path for s in boundary.suspects])
            if pair.stale_by is not None and pair.rollout is not None and pair.actor is not None:
                held = pair.rollout.held_weight_version
                checks.append(
                    f"Trace the weight sync for {where}: the rollout still held version {held}, the actor "
                    f"{pair.actor.held_weight_version} ({pair.stale_by} version(s) behind): find why the sync(s) "
                    f"after version {held} never reached the rollout engine (skipped, dropped while another was in "
                    "flight, or issued before the update it should carry)."
                )
            else:
                checks.append(
                    f"Trace the weight sync for {where}: compare the actor's parameter with what the rollout engine "
                    "loaded"
                    + (f" (weight version {pair.weight_version} in both correlation logs)." if pair.weight_version
                       is not None else " (no weight version was logged: check which sync the rollout ran with).")
                )
        elif module.bucket == "module_impl_mismatch":
            checks.append(
                f"Diff the training and inference implementations of {m} "
                "(epsilon, activation, kernel, fusion, dtype casts)."
            )
        elif module.bucket == "systemic_misalignment":
            checks.append(
                "Check the inputs of the first dumped module (token ids, positions, mask) and widen the dump "
                "list upstream."
            )
        else:
            checks.append(
                f"Check numerical sensitivity of {m} in the rollout dtype (accumulation precision, fused kernels)."
            )
        if not tensor_evidence:
            suspects = [s.module_path for s in boundary.suspects]
            if boundary.previous_aligned is not None:
                suspects.append(boundary.previous_aligned.module_path)
            checks.append(
                "Rerun the same window with task tensor narrowed to the suspects and the previous aligned boundary "
                f"(msprobe_config.tensor_pass_config): list = {sorted(set(suspects))}; statistics only screen."
            )
        checks.append(
            "Cross-check with MSProbe's own comparison: "
            f"msprobe compare -tp {pair.actor_dump} -gp {pair.rollout_dump} -o <out>"
        )
    return checks
