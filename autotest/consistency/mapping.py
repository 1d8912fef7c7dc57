"""Map module keys of the training (actor) side onto the rollout side.

In order of precedence:

1. a user mapping file (YAML/JSON), asserted by the user, confidence high::

       rules:                       # regex on train module paths, rollout replacement(s)
         - train: 'decoder\\.layers\\.(\\d+)\\.mlp\\.experts'
           rollout: 'model.layers.\\1.mlp.fused_experts'
       modules:                     # exact train path -> rollout path or list of paths
         model.layers.0.self_attn.qkv: [model.layers.0.self_attn.q, model.layers.0.self_attn.k]

2. exact module path (high; also high when the classes differ only as a training framework's
   and an inference engine's classes for the same layer do, e.g. ``Linear`` ↔ ``RowParallelLinear``,
   ``Qwen3RMSNorm`` ↔ ``RMSNorm``; medium with a note for any other class difference),
3. known renames (Megatron ``decoder.layers`` / ``self_attention`` / ``linear_qkv`` →
   ``qkv_proj`` / ``linear_fc1`` → ``gate_up_proj`` / ``linear_fc2`` → ``down_proj`` /
   ``linear_proj`` → ``o_proj``), medium,
4. known fusions: q/k/v_proj ↔ qkv_proj, gate/up_proj ↔ gate_up_proj, medium. A fused group's
   statistics are combined over the concatenation; with tensors the fused output and weight are
   split by the engines' layout (``[q | k | v]``, ``[gate | up]`` along the output dim, sizes
   from the parts' shapes) and compared part by part. Megatron's ``linear_qkv`` interleaves q/k/v
   per query group instead, so it is compared by (order-free) statistics only.

Cardinality per train key: ``1:1``, ``1:N`` (one train module, several rollout modules),
``N:1`` (several train modules fused into one rollout module), ``1:0`` (no rollout module);
rollout-only modules are listed as ``0:1``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.consistency.dumps import ModuleEntry
from autotest.errors import UsageError
from autotest.inputs.schema import load_document

# Applied to module paths of both sides before comparing (training-framework name → HF/vLLM name).
RENAMES: tuple[tuple[str, str], ...] = (
    (r"^decoder\.layers\.", "model.layers."),
    (r"^embedding\.word_embeddings$", "model.embed_tokens"),
    (r"^decoder\.final_layernorm$", "model.norm"),
    (r"^output_layer$", "lm_head"),
    (r"\.self_attention\.linear_proj$", ".self_attn.o_proj"),
    (r"\.self_attention\.", ".self_attn."),
    (r"\.self_attention$", ".self_attn"),
    (r"\.linear_qkv$", ".qkv_proj"),
    (r"\.linear_fc1$", ".gate_up_proj"),
    (r"\.linear_fc2$", ".down_proj"),
    (r"\.pre_mlp_layernorm$", ".post_attention_layernorm"),
)
FUSIONS: dict[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}
FUSED_NOTE = (
    "fused: statistics combined over the concatenation (Max=max, Min=min, Mean numel-weighted, "
    "Norm=sqrt(sum of squares)); tensors split by the layout [parts in order] along the output dim"
)
INTERLEAVED_NOTE = (
    "Megatron linear_qkv interleaves q/k/v per query group while engines concatenate [q | k | v]: "
    "statistics only (order-free), no elementwise comparison"
)
# Class families: a training framework and an inference engine use different classes for one layer.
_FAMILIES = (
    ("linear", ("Linear", "ParallelLinear", "ReplicatedLinear", "ParallelLMHead", "TELinear",
                "TELayerNormColumnParallelLinear")),
    ("rmsnorm", ("RMSNorm",)),
    ("embedding", ("Embedding",)),
)  # fmt: skip


@dataclass(frozen=True)
class MappingGroup:
    """Train keys and the rollout keys that compute the same thing."""

    train_keys: tuple[str, ...]
    rollout_keys: tuple[str, ...]
    kind: str
    """exact | engine_class | class_differs | rename | fused | user | train_only | rollout_only."""
    confidence: str
    """high | medium | low."""
    notes: tuple[str, ...] = ()
    layout: tuple[str, ...] = ()
    """Fused groups: the parts' leaf names in the fused tensor's order (empty: no split)."""
    elementwise: bool = True
    """False where the two sides order elements differently (elementwise comparison meaningless)."""

    @property
    def cardinality(self) -> str:
        nt, nr = len(self.train_keys), len(self.rollout_keys)
        if nt == 0:
            return "0:1"
        if nr == 0:
            return "1:0"
        if nt > 1:
            return "N:1"
        return "1:1" if nr == 1 else "1:N"

    @property
    def comparable(self) -> bool:
        return bool(self.train_keys) and bool(self.rollout_keys)


@dataclass(frozen=True)
class UserRule:
    pattern: re.Pattern[str]
    rollout: tuple[str, ...]
    regex: bool


def load_user_mapping(path: Path) -> tuple[UserRule, ...]:
    """Read a YAML/JSON mapping file; UsageError names the file and key on a mistake."""
    path = Path(path)
    doc = load_document(path, "mapping file")
    if not isinstance(doc, dict) or not set(doc) <= {"rules", "modules"} or not doc:
        raise UsageError(f"{path}: expected an object with 'rules' and/or 'modules'")
    rules: list[UserRule] = []
    for i, rule in enumerate(doc.get("rules") or []):
        if not isinstance(rule, dict) or "train" not in rule or "rollout" not in rule:
            raise UsageError(f"{path}: key 'rules.{i}': needs 'train' (regex) and 'rollout' (replacement or list)")
        try:
            pattern = re.compile(str(rule["train"]))
        except re.error as exc:
            raise UsageError(f"{path}: key 'rules.{i}.train': invalid regex ({exc})") from None
        rules.append(UserRule(pattern, _targets(rule["rollout"], path, f"rules.{i}.rollout"), regex=True))
    modules = doc.get("modules") or {}
    if not isinstance(modules, dict):
        raise UsageError(f"{path}: key 'modules': must map train module paths to rollout path(s)")
    for train, target in modules.items():
        rules.append(
            UserRule(re.compile(re.escape(str(train))), _targets(target, path, f"modules.{train}"), regex=False)
        )
    return tuple(rules)


def _targets(value: Any, path: Path, key: str) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) and v for v in values):
        raise UsageError(f"{path}: key '{key}': must be a module path or a list of module paths")
    return tuple(values)


def canonical(path: str) -> str:
    for pattern, repl in RENAMES:
        path = re.sub(pattern, repl, path)
    return path


def map_modules(
    train: Mapping[str, ModuleEntry],
    rollout: Mapping[str, ModuleEntry],
    user_rules: tuple[UserRule, ...] = (),
) -> tuple[MappingGroup, ...]:
    """Groups in train completion order, then rollout-only modules."""
    by_rollout_path: dict[tuple[str, int], ModuleEntry] = {(e.path, e.call_index): e for e in rollout.values()}
    by_rollout_canon: dict[tuple[str, int], ModuleEntry] = {
        (canonical(e.path), e.call_index): e for e in rollout.values()
    }
    used: set[str] = set()
    groups: list[MappingGroup] = []
    fused_train: dict[tuple[str, int], list[ModuleEntry]] = {}

    for entry in train.values():
        group = _user_group(entry, user_rules, by_rollout_path) or _direct_group(
            entry, by_rollout_path, by_rollout_canon
        )
        if group is not None:
            groups.append(group)
            used.update(group.rollout_keys)
            continue
        canon = canonical(entry.path)
        parent, _, leaf = canon.rpartition(".")
        fused_name = next((f for f, parts in FUSIONS.items() if leaf in parts), None)
        if fused_name and (f"{parent}.{fused_name}", entry.call_index) in by_rollout_canon:
            fused_train.setdefault((f"{parent}.{fused_name}", entry.call_index), []).append(entry)
            continue
        if leaf in FUSIONS:
            parts = [by_rollout_canon.get((f"{parent}.{p}", entry.call_index)) for p in FUSIONS[leaf]]
            if all(parts):
                keys = tuple(p.key for p in parts if p is not None)
                interleaved = entry.path.endswith("linear_qkv")
                notes = (FUSED_NOTE, INTERLEAVED_NOTE) if interleaved else (FUSED_NOTE,)
                layout = () if interleaved else FUSIONS[leaf]
                groups.append(MappingGroup((entry.key,), keys, "fused", "medium", notes, layout))
                used.update(keys)
                continue
        groups.append(
            MappingGroup(
                (entry.key,), (), "train_only", "high", ("no rollout module with this name or a known rename/fusion",)
            )
        )

    for (fused_path, index), members in fused_train.items():
        target = by_rollout_canon[(fused_path, index)]
        expected = FUSIONS[fused_path.rpartition(".")[2]]
        members.sort(key=lambda m: expected.index(canonical(m.path).rpartition(".")[2]))
        names = {canonical(m.path).rpartition(".")[2] for m in members}
        notes = [FUSED_NOTE]
        confidence = "medium"
        if names != set(expected):
            notes.append(
                f"only {sorted(names)} of {list(expected)} found on the train side; combined statistics cover a part"
            )
            confidence = "low"
        layout = expected if names == set(expected) else ()
        groups.append(
            MappingGroup(tuple(m.key for m in members), (target.key,), "fused", confidence, tuple(notes), layout)
        )
        used.add(target.key)

    order = {k: e.order for k, e in train.items()}
    groups.sort(key=lambda g: min(order[k] for k in g.train_keys))
    for entry in rollout.values():
        if entry.key not in used:
            groups.append(MappingGroup((), (entry.key,), "rollout_only", "high", ("no train module maps here",)))
    return tuple(groups)


def _user_group(
    entry: ModuleEntry, rules: tuple[UserRule, ...], by_path: dict[tuple[str, int], ModuleEntry]
) -> MappingGroup | None:
    for rule in rules:
        m = rule.pattern.fullmatch(entry.path)
        if not m:
            continue
        targets = [m.expand(t) if rule.regex else t for t in rule.rollout]
        found = [by_path.get((t, entry.call_index)) for t in targets]
        keys = tuple(f.key for f in found if f is not None)
        missing = [t for t, f in zip(targets, found, strict=True) if f is None]
        notes = ["user mapping"] + (
            [f"user mapping names rollout modules absent from the dump: {missing}"] if missing else []
        )
        return MappingGroup(
            (entry.key,), keys, "user" if keys else "train_only", "high" if not missing else "low", tuple(notes)
        )
    return None


def _direct_group(
    entry: ModuleEntry,
    by_path: dict[tuple[str, int], ModuleEntry],
    by_canon: dict[tuple[str, int], ModuleEntry],
) -> MappingGroup | None:
    exact = by_path.get((entry.path, entry.call_index))
    if exact is not None:
        if exact.cls == entry.cls:
            return MappingGroup((entry.key,), (exact.key,), "exact", "high")
        if class_family(exact.cls) == class_family(entry.cls):
            return MappingGroup(
                (entry.key,), (exact.key,), "engine_class", "high",
                (f"engine class {exact.cls} for train class {entry.cls} (same layer kind)",),
            )  # fmt: skip
        return MappingGroup(
            (entry.key,),
            (exact.key,),
            "class_differs",
            "medium",
            (f"class differs: train {entry.cls}, rollout {exact.cls}",),
        )
    renamed = by_canon.get((canonical(entry.path), entry.call_index))
    if renamed is not None:
        notes = [f"known rename: {entry.path} -> {renamed.path}"]
        interleaved = entry.path.endswith("linear_qkv") and not renamed.path.endswith("linear_qkv")
        if interleaved:
            notes.append(INTERLEAVED_NOTE)
        return MappingGroup((entry.key,), (renamed.key,), "rename", "medium", tuple(notes), elementwise=not interleaved)
    return None


def class_family(cls: str) -> str:
    """``linear``, ``rmsnorm``, ``embedding`` or the class name itself."""
    for family, suffixes in _FAMILIES:
        if cls.endswith(suffixes):
            return family
    return cls


def layer_index(key_or_path: str) -> int | None:
    m = re.search(r"layers\.(\d+)(\.|$)", key_or_path)
    return int(m.group(1)) if m else None


def block_of(path: str) -> str:
    """A coarse block label for reports (attn, mlp, norm, embed, head, layer, model)."""
    leaf = path.rpartition(".")[2]
    if "embed" in path:
        return "embed"
    if leaf in ("lm_head", "output_layer"):
        return "head"
    if "norm" in leaf:
        return "norm"
    if any(s in path for s in ("self_attn", "self_attention", "attention", "rotary")):
        return "attn"
    if any(s in path for s in (".mlp", "experts")):
        return "mlp"
    if re.search(r"layers\.\d+$", path):
        return "layer"
    return "model"
