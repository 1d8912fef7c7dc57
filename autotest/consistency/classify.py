"""Classify each mapped module and find the first credible divergence boundary.

Per module, each component (output, parameters, inputs) is ``aligned`` (ok), ``marginal``
(warn), ``divergent`` (alert), ``unknown`` (not comparable) or ``none`` (no tensors). Buckets,
first rule that applies:

- insufficient_output_evidence: no comparable output (unmapped module, shape differs).
- parameter_sync_mismatch: parameters diverge. Weights are compared directly, so upstream
  noise cannot explain it, whatever the inputs do (a note says when inputs differ too). Also
  parameters that differ only at warn level when the output diverges with non-divergent inputs:
  statistics of a weight barely move under a small random perturbation (a 5% perturbation
  moves the Norm by ~0.1%), while identical weights agree to within the dtype's noise floor.
  And parameters at warn level whose dtype is the same on both sides, whatever the output: a
  sync copies such weights bit for bit, so a stale one (a bucket never flushed) shows there
  before its output has moved past the noise floor.
- normal_aligned: output aligned or marginal.
- upstream_propagation_or_amplification: output diverges and an earlier module (in forward
  completion order, children before parents) already diverged: a child, or the producer of its
  inputs. Also a module that blows a marginal input difference up to a divergent output
  (amplification, no earlier divergence).
- module_impl_mismatch: output diverges while inputs and parameters are aligned: the module's
  own computation differs (kernel, epsilon, activation). Also the parent whose own code between
  its children introduced the difference (the first affected child has divergent inputs but
  nothing before it diverged).
- systemic_misalignment: inputs diverge and nothing dumped explains it: the difference enters
  before the first dumped module (different model inputs, or a ``list`` too narrow).

The first credible boundary is the first module in completion order whose bucket is
parameter_sync_mismatch, module_impl_mismatch, systemic_misalignment or amplification; the
previous aligned boundary is the last aligned module before the point where it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotest.consistency.value_compare import GroupCompare

BUCKETS = (
    "module_impl_mismatch",
    "parameter_sync_mismatch",
    "upstream_propagation_or_amplification",
    "systemic_misalignment",
    "insufficient_output_evidence",
    "normal_aligned",
)
CREDIBLE = ("parameter_sync_mismatch", "module_impl_mismatch", "systemic_misalignment")
_LEVEL = {"ok": "aligned", "warn": "marginal", "alert": "divergent", "not_comparable": "unknown", "none": "none"}


@dataclass(frozen=True)
class ModuleAnalysis:
    """The verdict on one mapped module of one forward pair."""

    order: int
    module_path: str
    compare: GroupCompare
    output: str
    parameters: str
    inputs: str
    bucket: str
    explained_by: str | None
    """For propagation: the module the difference comes from."""
    amplification: bool
    notes: tuple[str, ...]

    @property
    def credible(self) -> bool:
        return self.bucket in CREDIBLE or self.amplification

    @property
    def divergent(self) -> bool:
        return self.output == "divergent" or self.parameters == "divergent"


@dataclass(frozen=True)
class Boundary:
    """Where the divergence first shows, and the last aligned module before it."""

    module: ModuleAnalysis
    entry_order: int
    """Order of the first module where the difference is visible (a child, for a parent's own code)."""
    previous_aligned: ModuleAnalysis | None
    suspects: tuple[ModuleAnalysis, ...]
    """Every credible module (the boundary first)."""
    explained: tuple[ModuleAnalysis, ...]
    """Divergent modules excluded as propagation, with what explains them."""


def _is_ancestor(ancestor: str, path: str) -> bool:
    return path.startswith(ancestor + ".")


def classify_modules(compares: Sequence[GroupCompare]) -> tuple[ModuleAnalysis, ...]:
    """Bucket every comparable group, in the given (train completion) order."""
    levels = [
        (
            _LEVEL[c.component_status("output")],
            _LEVEL[c.component_status("parameter")],
            _LEVEL[c.component_status("input")],
        )
        for c in compares
    ]
    paths = [c.module_path for c in compares]
    results: list[ModuleAnalysis] = []
    impl_parents: dict[str, str] = {}  # ancestor path -> first child where its own difference shows
    for i, (cmp, (output, params, inputs)) in enumerate(zip(compares, levels, strict=True)):
        notes: list[str] = list(cmp.group.notes)
        explained_by: str | None = None
        amplification = False
        earlier = [
            results[j] for j in range(i) if results[j].output == "divergent" or results[j].parameters == "divergent"
        ]
        if not cmp.group.comparable or output in ("unknown", "none"):
            bucket = "insufficient_output_evidence"
            if cmp.group.comparable:
                notes.append("output not comparable (shape differs or missing)")
        elif params == "divergent" or (params == "marginal" and inputs != "divergent"
                                       and (output == "divergent" or _copied_exactly(cmp))):
            bucket = "parameter_sync_mismatch"
            if params == "marginal" and output == "divergent":
                notes.append(
                    "parameter statistics differ beyond the dtype's noise floor (warn level); with aligned inputs "
                    "the divergent output points at the weights: confirm with the tensor pass"
                )
            elif params == "marginal":
                notes.append(
                    "parameters of the same dtype on both sides differ beyond the noise floor (warn level): a "
                    "sync copies weights exactly, so the sides hold different weights, however little the output "
                    "moved yet"
                )
            if inputs == "divergent":
                notes.append("inputs differ too (upstream divergence)")
        elif output in ("aligned", "marginal"):
            bucket = "normal_aligned"
            if output == "marginal" or inputs in ("marginal", "divergent"):
                notes.append(f"output {output}, inputs {inputs}: within tolerance")
        else:
            children = [m for m in earlier if _is_ancestor(cmp.module_path, m.module_path)]
            if children:
                bucket, explained_by = "upstream_propagation_or_amplification", children[0].module_path
                if cmp.module_path in impl_parents:
                    bucket, explained_by = "module_impl_mismatch", None
                    notes.append(
                        f"inputs aligned but the difference first shows at its child {impl_parents[cmp.module_path]}, "
                        "whose inputs this module computed in its own code between submodules"
                    )
            elif inputs in ("divergent", "marginal") and earlier:
                bucket, explained_by = "upstream_propagation_or_amplification", earlier[-1].module_path
            elif inputs == "divergent":
                ancestor = _aligned_ancestor(i, paths, levels)
                if ancestor is not None:
                    bucket, explained_by = "upstream_propagation_or_amplification", ancestor
                    impl_parents.setdefault(ancestor, cmp.module_path)
                    notes.append(f"inputs already differ with nothing earlier diverging: produced inside {ancestor}")
                else:
                    bucket = "systemic_misalignment"
                    notes.append(
                        "inputs already differ at the first divergent dumped module: "
                        "the difference enters before the dumped modules"
                    )
            elif inputs == "marginal":
                bucket, amplification = "upstream_propagation_or_amplification", True
                notes.append("amplification: a marginal input difference becomes a divergent output here")
            else:
                bucket = "module_impl_mismatch"
                if inputs in ("none", "unknown"):
                    notes.append("no comparable input tensors; inputs assumed aligned")
        results.append(
            ModuleAnalysis(
                order=i,
                module_path=cmp.module_path,
                compare=cmp,
                output=output,
                parameters=params,
                inputs=inputs,
                bucket=bucket,
                explained_by=explained_by,
                amplification=amplification,
                notes=tuple(notes),
            )
        )
    return tuple(results)


def _copied_exactly(cmp: GroupCompare) -> bool:
    """Whether every parameter of the group has one floating dtype on both sides: a weight sync copies such a
    tensor bit for bit, so statistics beyond the noise floor (warn) are other weights, not rounding. A bf16 copy of
    an fp32 master is rounded, and its warn level is noise."""
    params = [t for t in cmp.tensors if t.component == "parameter"]
    return bool(params) and all(t.dtype_status == "same" and t.precision != "int" for t in params)


def _aligned_ancestor(i: int, paths: list[str], levels: list[tuple[str, str, str]]) -> str | None:
    """Nearest enclosing module whose inputs are aligned (it completes later, so look ahead).

    An ancestor whose inputs were not dumped (a self_attn called with keyword arguments) counts when an ancestor
    above it has aligned inputs and nothing before this module diverged: the deepest such module is where the
    difference is made, not its parent layer. In a dump narrowed to that ancestor (the tensor pass) nothing above
    it is dumped; then an earlier child of it whose inputs agree (its q/k/v projections) shows what entered it."""
    enclosing = [j for j in range(i + 1, len(paths)) if _is_ancestor(paths[j], paths[i])]
    candidates = [paths[j] for j in enclosing if levels[j][2] in ("aligned", "none", "unknown")]
    if not any(levels[j][2] == "aligned" for j in enclosing):
        candidates = [c for c in candidates
                      if any(_is_ancestor(c, paths[j]) and levels[j][2] == "aligned" for j in range(i))]
    return max(candidates, key=len) if candidates else None


def find_boundary(analyses: Sequence[ModuleAnalysis]) -> Boundary | None:
    """The first credible divergence, or None when nothing credible diverges."""
    suspects = [a for a in analyses if a.credible]
    if not suspects:
        return None
    first = suspects[0]
    entry = first.order
    children = [
        a for a in analyses if a.order < first.order and _is_ancestor(first.module_path, a.module_path) and a.divergent
    ]
    if first.bucket == "module_impl_mismatch" and children:
        entry = children[0].order
    previous = next(
        (a for a in reversed(analyses[:entry]) if a.bucket == "normal_aligned" and a.output == "aligned"),
        None,
    )
    explained = tuple(
        a for a in analyses if a.bucket == "upstream_propagation_or_amplification" and not a.amplification
    )
    return Boundary(
        module=first, entry_order=entry, previous_aligned=previous, suspects=tuple(suspects), explained=explained
    )
