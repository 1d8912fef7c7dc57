"""The dtype half of the root-cause judgement: which modules each side computes in which dtype.

MSProbe's dump.json gives every tensor's dtype. When the two sides' module outputs carry different dtypes (an
actor recompute under bf16 autocast against an fp32 rollout, a bf16 engine against an fp32 trainer), a
divergence the module thresholds tolerate as that dtype's rounding still moves the log-probs: the cause is the
numerics precision of one side, and the report names it with the modules and both dtypes
(:func:`with_precision_finding`), instead of a place after the model. Parameters kept in float32 while the
outputs are in a lower precision is autocast's signature (the weights are cast per matmul, not stored so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autotest.consistency.logprob_verdict import AFTER_MODEL
from autotest.consistency.value_compare import GroupCompare
from autotest.consistency.verdict import RootCauseReport

PRECISION = "precision_mismatch"
"""Root-cause bucket: the sides compute the divergent modules in different dtypes."""
_BITS = {"float64": 64, "float32": 32, "bfloat16": 16, "float16": 16}
MODULES_SHOWN = 8
#: modules named in the one-line localisation
_NAMED = 3


@dataclass(frozen=True)
class DtypeDifference:
    """One module whose outputs carry different dtypes on the two sides."""

    module: str
    train_dtype: str
    rollout_dtype: str
    train_parameter_dtype: str | None
    rollout_parameter_dtype: str | None


def _bits(dtype: str) -> int:
    return _BITS.get(dtype.replace("torch.", ""), 0)


def dtype_differences(compares: Sequence[GroupCompare]) -> tuple[DtypeDifference, ...]:
    """The modules (in the order compared) whose floating-point outputs differ in dtype between the sides."""
    found = []
    for group in compares:
        outputs = [t for t in group.tensors if t.component == "output" and _bits(t.train.dtype) and
                   _bits(t.rollout.dtype) and t.train.dtype != t.rollout.dtype]
        if outputs:
            params = [t for t in group.tensors if t.component == "parameter"]
            found.append(DtypeDifference(group.module_path, outputs[0].train.dtype, outputs[0].rollout.dtype,
                                         params[0].train.dtype if params else None,
                                         params[0].rollout.dtype if params else None))
    return tuple(found)


def precision_cause(differences: Sequence[DtypeDifference], compared: int,
                    autocast_seen: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """The root cause naming the lower-precision side, its dtype against the other's, and the modules;
    ``autocast_seen``: side → the autocast states its correlation log recorded (``off``, ``torch.bfloat16``)."""
    train, rollout = Counter(d.train_dtype for d in differences), Counter(d.rollout_dtype for d in differences)
    train_dtype, rollout_dtype = train.most_common(1)[0][0], rollout.most_common(1)[0][0]
    side = "actor" if _bits(train_dtype) < _bits(rollout_dtype) else "rollout"
    low = [d for d in differences if (d.train_dtype if side == "actor" else d.rollout_dtype) ==
           (train_dtype if side == "actor" else rollout_dtype)]
    kept_params = [d for d in low if (d.train_parameter_dtype if side == "actor" else d.rollout_parameter_dtype)
                   == (rollout_dtype if side == "actor" else train_dtype)]
    seen = sorted(set((autocast_seen or {}).get(side, ())))
    hook_says = [a for a in seen if a != "off"]
    autocast = bool(kept_params) or bool(hook_says)
    modules = [d.module for d in differences]
    shown = ", ".join(modules[:_NAMED]) + (f" and {len(modules) - _NAMED} more" if len(modules) > _NAMED else "")
    low_dtype, other_dtype = (train_dtype, rollout_dtype) if side == "actor" else (rollout_dtype, train_dtype)
    how = (f"its parameters stay {other_dtype} while the outputs are {low_dtype} (e.g. {kept_params[0].module}): "
           "computed under autocast" if kept_params else f"its parameters are {low_dtype} too: the model is cast")
    if seen:
        how += (f"; the collection hook saw autocast {', '.join(hook_says)} on the {side}'s forwards" if hook_says
                else f"; the collection hook saw autocast off on the {side}'s forwards")
    return {
        "module": "numerics precision (dtype)", "bucket": PRECISION, "side": side,
        "dtypes": {"actor": train_dtype, "rollout": rollout_dtype}, "autocast": autocast,
        "autocast_seen": {k: sorted(set(v)) for k, v in (autocast_seen or {}).items() if v},
        "modules": modules, "first_module": modules[0],
        "localisation": f"the {side} side computes {shown} in {low_dtype}, the other side in {other_dtype}",
        "train_keys": [], "rollout_keys": [], "train_modules": modules[:MODULES_SHOWN] if side == "actor" else [],
        "rollout_modules": modules[:MODULES_SHOWN] if side == "rollout" else [], "divergent_parts": [],
        "evidence": "dtypes",
        "why": (f"the dumps give {len(modules)} of {compared} compared module(s) outputs in {train_dtype} on the actor "
                f"side and {rollout_dtype} on the rollout side, from {modules[0]} on; {how}. The log-probs differ by "
                f"that rounding: the divergence is the {side}'s numerics precision, not a module's code or a step "
                "after the model"),
    }


PRECISION_HYPOTHESIS = {
    "expected_train_path": "Both sides compute the forward that scores the sampled tokens in the same dtype (the "
                           "run's configured precision), so their log-probs agree to that dtype's rounding.",
    "inference_path": "One side computes in a lower precision than the other: an autocast context or a "
                      "mixed-precision flag reaching the log-prob recompute, or a model cast to bf16/fp16.",
}


def precision_checks(cause: dict[str, Any]) -> list[str]:
    side, dtypes = cause["side"], cause["dtypes"]
    return [f"Check the precision the {side} side computes {cause['first_module']} in ({dtypes[side]} in the dumps, "
            f"{dtypes['rollout' if side == 'actor' else 'actor']} on the other side): "
            + ("an autocast context (torch.autocast / a mixed-precision setting) around its forward"
               if cause["autocast"] else "the dtype its model is loaded or cast to") + ".",
            f"Re-run the window with the {side}'s forward in the other side's dtype: the log-prob difference should "
            "fall to that dtype's noise."]


def with_precision_finding(report: RootCauseReport, differences: Sequence[DtypeDifference], compared: int,
                           autocast_seen: Mapping[str, Sequence[str]] | None = None) -> RootCauseReport:
    """The judgement completed by the dumps' dtypes: a divergence that no module's code explains (after the model,
    not localised, or at a module whose dtypes differ) becomes a precision cause when the sides' dtypes differ."""
    if not differences:
        return report
    cause = precision_cause(differences, compared, autocast_seen)
    line = f"dtypes, {cause['why']}"
    root = report.root_cause or {}
    unexplained = root.get("bucket") == AFTER_MODEL and root.get("pair") == "recomputed vs trainer" or \
        report.divergence == "module" and report.verdict != "root_cause_found" or \
        report.verdict == "root_cause_found" and root.get("module") in cause["modules"]
    if not unexplained:
        return replace(report, evidence_chain=(*report.evidence_chain, line))
    return replace(report, verdict="root_cause_found", confidence="medium", root_cause=cause, divergence="precision",
                   hypothesis=PRECISION_HYPOTHESIS, evidence_chain=(*report.evidence_chain, line),
                   next_checks=tuple(precision_checks(cause)))
