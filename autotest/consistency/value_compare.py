"""Compare the tensors of each mapped module group: statistics always, elements when dumped.

Relative error of a statistic s (Max, Min, Mean, Norm), train value t, rollout value r::

    rel_err = |t - r| / max(|t|, rms_t)       rms_t = Norm_t / sqrt(numel)

The floor ``rms_t`` keeps a Mean (or a Max/Min) that happens to sit near zero from turning
healthy noise into a huge ratio: the difference is measured against the tensor's own scale.
Integer tensors (token ids, positions) must match exactly.

Thresholds depend on the less precise dtype of the pair, because a bf16 rollout against an fp32
trainer is *healthy* at relative errors around 1e-3..1e-2: bf16 has an 8-bit mantissa (unit
round-off 2**-8 = 3.9e-3), and MSProbe (26.2, precision "low") computes Mean/Norm of a bf16
tensor in bf16, adding its own rounding. Measured on the tiny Qwen3 (bf16 rollout vs fp32
actor, identical weights, 10-token sequences): every module statistic within 7.5e-3 by this
definition, so ok ≤ 3e-2 leaves room for deeper models while a wrong weight or kernel (≥ 1e-1 on
some statistic of its output) still alerts. The flip side: a bf16 rollout masks small weight
perturbations in statistics; the tensor pass is the tool for those.

=========  ==========  ===========  =========
pair       ok ≤        warn ≤       alert >
=========  ==========  ===========  =========
fp32/fp64  1e-4        1e-2         1e-2
fp16       5e-3        5e-2         5e-2
bf16       3e-2        1e-1         1e-1
=========  ==========  ===========  =========

fp32 keeps the MindStudio thresholds (ok ≤ 1e-4, warn ≤ 1e-2). With tensors (task tensor) the
status comes from the elementwise relative L2 error ``||t - r|| / ||t||`` under the same table,
with cosine similarity, max absolute error and max relative error (floored by ``rms_t``) reported
beside it; statistics only screen, tensors decide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from autotest.consistency.dumps import STATS, ModuleEntry, TensorStat, load_tensor
from autotest.consistency.mapping import MappingGroup

THRESHOLDS: dict[str, tuple[float, float]] = {"fp32": (1e-4, 1e-2), "fp16": (5e-3, 5e-2), "bf16": (3e-2, 1e-1)}
SEVERITY = {"ok": 0, "warn": 1, "not_comparable": 2, "alert": 3}
_INT_DTYPES = ("int", "bool", "uint")


@dataclass(frozen=True)
class TensorMetrics:
    """Elementwise comparison of one tensor (task tensor)."""

    cosine: float
    max_abs_err: float
    max_rel_err: float
    rel_err: float
    """||t - r|| / ||t||."""
    status: str


@dataclass(frozen=True)
class TensorCompare:
    """One tensor of a module group, train side against rollout side."""

    path: str
    component: str
    train: TensorStat
    rollout: TensorStat
    precision: str
    """Threshold class: fp32 | fp16 | bf16 | int."""
    stat_rel_err: Mapping[str, float | None]
    stat_status: Mapping[str, str]
    shape_status: str
    """same | differs."""
    dtype_status: str
    """same | differs (expected for a bf16 rollout against an fp32 trainer)."""
    tensor: TensorMetrics | None
    status: str
    """ok | warn | alert | not_comparable: tensors decide when dumped, else the worst statistic."""
    evidence: str
    """``tensor`` or ``statistics``."""

    @property
    def priority(self) -> int:
        """1 = look first (an alert on an output or parameter), 3 = fine."""
        if self.status == "alert":
            return 1
        return 2 if self.status in ("warn", "not_comparable") else 3


@dataclass(frozen=True)
class GroupCompare:
    """All tensor comparisons of one mapping group."""

    group: MappingGroup
    module_path: str
    tensors: tuple[TensorCompare, ...]
    unmatched: tuple[str, ...] = field(default=())
    """Tensor paths present on one side only."""
    divergent_parts: tuple[str, ...] = field(default=())
    """Fused groups compared part by part: the train-side modules whose slice alerts."""

    def component_status(self, component: str) -> str:
        """Worst status of a component's tensors, or ``none`` when it has no tensors."""
        found = [t.status for t in self.tensors if t.component == component]
        return max(found, key=SEVERITY.__getitem__) if found else "none"

    def evidence(self) -> str:
        return "tensor" if any(t.evidence == "tensor" for t in self.tensors) else "statistics"


def precision_class(dtype_a: str, dtype_b: str) -> str:
    dtypes = (dtype_a.replace("torch.", ""), dtype_b.replace("torch.", ""))
    if any(d.startswith(_INT_DTYPES) for d in dtypes):
        return "int"
    if "bfloat16" in dtypes:
        return "bf16"
    if "float16" in dtypes:
        return "fp16"
    return "fp32"


def status_of(rel_err: float | None, precision: str) -> str:
    if rel_err is None:
        return "not_comparable"
    if precision == "int":
        return "ok" if rel_err == 0 else "alert"
    if math.isnan(rel_err):
        return "alert"
    ok, warn = THRESHOLDS[precision]
    return "ok" if rel_err <= ok else "warn" if rel_err <= warn else "alert"


def _rms(stat: TensorStat) -> float:
    norm = stat.stats.get("Norm")
    return abs(norm) / math.sqrt(stat.numel) if norm is not None and stat.numel else 0.0


def stat_rel_err(t: TensorStat, r: TensorStat, name: str) -> float | None:
    a, b = t.stats.get(name), r.stats.get(name)
    if a is None or b is None:
        return None
    if not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if a == b else math.nan
    denominator = max(abs(a), _rms(t), 1e-30)
    return abs(a - b) / denominator


def _tensor_metrics(t: TensorStat, r: TensorStat, precision: str) -> TensorMetrics:
    a, b = load_tensor(t).flatten(), load_tensor(r).flatten()
    diff = a - b
    norm_a = float(a.norm())
    rms = norm_a / math.sqrt(max(a.numel(), 1))
    denom = float(a.norm() * b.norm())
    identical = a.numel() == 0 or float(diff.abs().max()) == 0
    cosine = float((a * b).sum()) / denom if denom > 0 else (1.0 if identical else 0.0)
    rel_err = float(diff.norm()) / norm_a if norm_a > 0 else (0.0 if float(diff.norm()) == 0 else math.inf)
    max_rel = float((diff.abs() / a.abs().clamp(min=max(rms, 1e-30))).max()) if a.numel() else 0.0
    return TensorMetrics(
        cosine=cosine,
        max_abs_err=float(diff.abs().max()) if a.numel() else 0.0,
        max_rel_err=max_rel,
        rel_err=rel_err,
        status=status_of(rel_err, precision) if precision != "int" else ("ok" if rel_err == 0 else "alert"),
    )


def compare_tensor(path: str, component: str, t: TensorStat, r: TensorStat, use_tensors: bool) -> TensorCompare:
    precision = precision_class(t.dtype, r.dtype)
    shape_status = "same" if t.shape == r.shape else "differs"
    names = STATS[:2] if precision == "int" else STATS
    rel = {s: stat_rel_err(t, r, s) for s in names}
    stat_status = {s: status_of(v, precision) for s, v in rel.items()}
    metrics = None
    if use_tensors and shape_status == "same" and t.data_file is not None and r.data_file is not None:
        metrics = _tensor_metrics(t, r, precision)
    if shape_status == "differs":
        status = "not_comparable"
    elif metrics is not None:
        status = metrics.status
    else:
        known = [s for s in stat_status.values() if s != "not_comparable"]
        status = max(known, key=SEVERITY.__getitem__) if known else "not_comparable"
    return TensorCompare(
        path=path,
        component=component,
        train=t,
        rollout=r,
        precision=precision,
        stat_rel_err=rel,
        stat_status=stat_status,
        shape_status=shape_status,
        dtype_status="same" if t.dtype == r.dtype else "differs",
        tensor=metrics,
        status=status,
        evidence="tensor" if metrics is not None else "statistics",
    )


def combine(stats: Sequence[TensorStat], dim: int = -1) -> TensorStat:
    """Statistics of the concatenation along ``dim`` (exact: all four are order-free). Fused
    projections concatenate outputs along the last dim and weights along dim 0."""
    if len(stats) == 1:
        return stats[0]
    numel = [s.numel for s in stats]
    total = sum(numel)
    values: dict[str, float | None] = {}
    maxes = [s.stats.get("Max") for s in stats]
    mins = [s.stats.get("Min") for s in stats]
    means = [s.stats.get("Mean") for s in stats]
    norms = [s.stats.get("Norm") for s in stats]
    values["Max"] = max(maxes) if None not in maxes else None  # type: ignore[type-var]
    values["Min"] = min(mins) if None not in mins else None  # type: ignore[type-var]
    values["Mean"] = (
        sum(m * n for m, n in zip(means, numel, strict=True)) / total if None not in means and total else None
    )  # type: ignore[operator]
    values["Norm"] = math.sqrt(sum(n * n for n in norms)) if None not in norms else None  # type: ignore[operator]
    first = stats[0]
    shape = list(first.shape)
    if shape:
        shape[dim] = sum(s.shape[dim] for s in stats)
    dtypes = {s.dtype for s in stats}
    return TensorStat(
        path=first.path,
        component=first.component,
        dtype=first.dtype if len(dtypes) == 1 else "mixed",
        shape=tuple(shape),
        stats=values,
        data_file=None,  # no elementwise comparison of a fused group (layout unknown)
    )


def _side_tensors(entries: Sequence[ModuleEntry]) -> dict[str, TensorStat]:
    """One side of a group: inputs of the first module (fused parts share their input), outputs
    and parameters combined over the parts."""
    first = entries[0]
    out = {t.path: t for t in first.component("input")}
    paths: dict[str, list[TensorStat]] = {}
    for entry in entries:
        for t in entry.tensors:
            if t.component != "input":
                paths.setdefault(t.path, []).append(t)
    for path, parts in paths.items():
        if len(parts) == len(entries):  # a path missing in some part cannot be combined
            out[path] = combine(parts, dim=0 if parts[0].component == "parameter" else -1)
    return out


def _slice(stat: TensorStat, dim: int, start: int, length: int, label: str) -> TensorStat:
    """One part of a fused tensor, its statistics computed from the dumped data."""
    dim = dim % len(stat.shape)
    part = replace(stat, part=(dim, start, length))
    values = load_tensor(part)
    shape = list(stat.shape)
    shape[dim] = length
    stats = {"Max": float(values.max()), "Min": float(values.min()), "Mean": float(values.mean()),
             "Norm": float(values.norm())}  # fmt: skip
    return replace(part, path=f"{stat.path}[{label}]", shape=tuple(shape), stats=stats)


def _compare_split(
    group: MappingGroup, t_entries: list[ModuleEntry], r_entries: list[ModuleEntry]
) -> GroupCompare:
    """A fused group with tensors: slice the fused side by the layout, compare each part elementwise."""
    train_parts = len(t_entries) > 1
    parts, fused = (t_entries, r_entries[0]) if train_parts else (r_entries, t_entries[0])
    fused_by_path = {t.path: t for t in fused.tensors}
    results: list[TensorCompare] = []
    unmatched: list[str] = []
    divergent: list[str] = []
    offsets = {"output": 0, "parameter": 0}
    for index, (leaf, entry) in enumerate(zip(group.layout, parts, strict=True)):
        part_alerts = False
        for stat in entry.tensors:
            whole = fused_by_path.get(stat.path)
            if whole is None or whole.data_file is None or stat.data_file is None:
                unmatched.append(f"{'train' if train_parts else 'rollout'}:{stat.path}[{leaf}]")
                continue
            if stat.component == "input":
                if index:
                    continue  # the parts share one input: compared once
                piece, other = whole, stat
            else:
                dim = 0 if stat.component == "parameter" else -1
                length = stat.shape[dim]
                piece = _slice(whole, dim, offsets[stat.component], length, leaf)
                other = replace(stat, path=piece.path)
            t, r = (other, piece) if train_parts else (piece, other)
            result = compare_tensor(piece.path, stat.component, t, r, True)
            results.append(result)
            part_alerts = part_alerts or (stat.component != "input" and result.status == "alert")
        for component, dim in (("output", -1), ("parameter", 0)):
            sized = [s for s in entry.tensors if s.component == component]
            offsets[component] += sized[0].shape[dim] if sized else 0
        if part_alerts:
            divergent.append((t_entries[index] if train_parts else t_entries[0]).path)
    module_path = t_entries[0].path
    if train_parts:
        module_path = divergent[0] if len(divergent) == 1 else _fused_label(t_entries)
    return GroupCompare(group, module_path, tuple(results), tuple(unmatched), tuple(divergent if train_parts else ()))


def _fused_label(entries: Sequence[ModuleEntry]) -> str:
    """``model.layers.0.self_attn.{q_proj,k_proj,v_proj}``: every train part of a fused group."""
    if len(entries) == 1:
        return entries[0].path
    parent = entries[0].path.rpartition(".")[0]
    return f"{parent}.{{{','.join(e.path.rpartition('.')[2] for e in entries)}}}"


def compare_group(
    group: MappingGroup,
    train: Mapping[str, ModuleEntry],
    rollout: Mapping[str, ModuleEntry],
    use_tensors: bool = True,
) -> GroupCompare:
    """Compare every tensor path the two sides share; match leftovers by position."""
    t_entries = [train[k] for k in group.train_keys]
    r_entries = [rollout[k] for k in group.rollout_keys]
    module_path = _fused_label(t_entries) if t_entries else r_entries[0].path
    if not (t_entries and r_entries):
        return GroupCompare(group, module_path, ())
    has_data = all(t.data_file is not None for e in t_entries + r_entries for t in e.tensors)
    if use_tensors and group.kind == "fused" and group.layout and has_data:
        return _compare_split(group, t_entries, r_entries)
    elementwise = use_tensors and group.elementwise and len(t_entries) == 1 and len(r_entries) == 1
    t_side, r_side = _side_tensors(t_entries), _side_tensors(r_entries)
    results: list[TensorCompare] = []
    unmatched: list[str] = []
    for component in ("input", "parameter", "output"):
        t_paths = [p for p, s in t_side.items() if s.component == component]
        r_paths = [p for p, s in r_side.items() if s.component == component]
        shared = [p for p in t_paths if p in r_side]
        for p in shared:
            results.append(compare_tensor(p, component, t_side[p], r_side[p], elementwise))
        t_rest = [p for p in t_paths if p not in r_side]
        r_rest = [p for p in r_paths if p not in t_side]
        # positional and keyword passing of the same argument differ only in name
        if len(t_rest) == len(r_rest):
            for tp, rp in zip(t_rest, r_rest, strict=True):
                results.append(compare_tensor(f"{tp}~{rp}", component, t_side[tp], r_side[rp], elementwise))
        else:
            unmatched.extend([f"train:{p}" for p in t_rest] + [f"rollout:{p}" for p in r_rest])
    return GroupCompare(group, module_path, tuple(results), tuple(unmatched))
