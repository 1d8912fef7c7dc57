"""How one side's model is laid out over its ranks, and where each dumped tensor of a module sits in the whole.

A side's layout is declared (``consistency analyze --rollout-layout tp=4``; the job's diagnostic config
``layout: {rollout: "tp=4", train: "pp=2"}``) or inferred from the rank folders (:mod:`.reassemble`). Text form,
comma-separated ``key=value``:

- ``tp=N`` tensor parallel, ``pp=N`` pipeline stages (ranks numbered tensor-parallel first, as Megatron and vLLM
  number them); data-parallel replicas are what is left of the rank count; ``ep=N`` expert parallel (with ``tp=1``:
  each rank holds whole copies of the dense modules and its own experts, numbered by global id);
- ``heads=N``, ``kv_heads=N`` the model's attention heads, for a fused qkv projection's split (otherwise read off
  the ``q_norm`` / ``k_norm`` dumps of either side);
- ``partial=GLOB[|GLOB]`` row-parallel modules whose dumped output is the partial sum before the all-reduce
  (SGLang's ``reduce_results=False``); by default a row-parallel output is dumped all-reduced.

A module's role, from its class or its name (Megatron and engine spellings alike), says how its tensors are split:

================  =============================  ================================================
role              modules                        tensors
================  =============================  ================================================
column            q/k/v/qkv/gate/up/gate_up      output split on the last dim, weight on dim 0
                  proj, lm_head, linear_qkv/fc1  (fused parts split per rank: ``[q_r | k_r | v_r]``)
row               o_proj, down_proj, out_proj,   input split on the last dim, weight on dim 1,
                  linear_proj/fc2                output all-reduced (or a partial sum, see above)
vocab             embed_tokens, word_embeddings  weight split on dim 0, output all-reduced
heads             q_norm, k_norm                 input and output split on the head dim (-2)
activation        act_fn inside an MLP           split on the last dim
replicated        everything else                every rank holds the whole tensor
================  =============================  ================================================
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from autotest.errors import UsageError

_COLUMN_NAMES = ("q_proj", "k_proj", "v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj", "lm_head",
                 "linear_qkv", "linear_fc1", "output_layer")
_ROW_NAMES = ("o_proj", "down_proj", "out_proj", "linear_proj", "linear_fc2")
_VOCAB_NAMES = ("embed_tokens", "word_embeddings")
_COLUMN_CLASSES = ("ColumnParallelLinear", "QKVParallelLinear", "MergedColumnParallelLinear", "ParallelLMHead")
#: fused column projections and their parts in the order they are concatenated per rank
FUSED_PARTS = {"qkv_proj": ("q", "k", "v"), "linear_qkv": ("q", "k", "v"), "gate_up_proj": ("gate", "up"),
               "linear_fc1": ("gate", "up")}
_KEYS = ("tp", "pp", "ep", "heads", "kv_heads", "partial")


@dataclass(frozen=True)
class SideLayout:
    """One side's parallel layout; a field left None is inferred from the dumps."""

    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    partial: tuple[str, ...] = ()

    @property
    def declared(self) -> bool:
        return self.tp is not None or self.pp is not None or self.ep is not None

    def is_partial(self, module_path: str) -> bool:
        return any(fnmatch.fnmatchcase(module_path, g) for g in self.partial)

    def text(self) -> str:
        parts = [f"{k}={getattr(self, k)}" for k in ("tp", "pp", "ep", "heads", "kv_heads") if getattr(self, k)]
        return ",".join(parts + ([f"partial={'|'.join(self.partial)}"] if self.partial else [])) or "inferred"


def parse_layout(text: str | None, where: str) -> SideLayout:
    """``tp=4,pp=2,...`` as a SideLayout; a bad key or value is one UsageError line naming ``where``."""
    if not text:
        return SideLayout()
    values: dict[str, object] = {}
    for item in str(text).split(","):
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or key not in _KEYS:
            raise UsageError(f"{where}: {item.strip()!r} is not one of {', '.join(k + '=...' for k in _KEYS)} "
                             "(e.g. tp=4,pp=2)")
        if key in values:
            raise UsageError(f"{where}: {key} is given twice; give it once")
        if key == "partial":
            values[key] = tuple(g for g in value.split("|") if g)
            if not values[key]:
                raise UsageError(f"{where}: partial={value!r} names no module; write partial=GLOB[|GLOB], e.g. "
                                 "partial=*.o_proj")
            continue
        if not value.isdigit() or int(value) < 1:
            raise UsageError(f"{where}: {key}={value!r} is not a whole number >= 1")
        values[key] = int(value)
    layout = SideLayout(**values)  # type: ignore[arg-type]
    problem = layout_problem(layout)
    if problem:
        raise UsageError(f"{where}: {layout.text()}: {problem}")
    return layout


def layout_problem(layout: SideLayout) -> str:
    """Why the declared head counts cannot be laid out over the declared ranks ("" when they can): each rank holds
    heads/tp query heads, each kv head serves heads/kv_heads of them, and kv heads are either split over the
    tensor-parallel ranks (kv_heads a multiple of tp) or replicated on them (tp a multiple of kv_heads)."""
    tp, heads, kv = layout.tp or 1, layout.heads, layout.kv_heads
    if heads is not None and heads % tp:
        return f"heads={heads} is not a multiple of tp={tp} (each rank holds heads/tp query heads); check both"
    if heads is not None and kv is not None and kv > heads:
        return f"kv_heads={kv} is above heads={heads} (a kv head serves one or more query heads); check both"
    if heads is not None and kv is not None and heads % kv:
        return f"heads={heads} is not a multiple of kv_heads={kv} (each kv head serves heads/kv_heads); check both"
    if kv is not None and kv % tp and tp % kv:
        return (f"kv_heads={kv} can be neither split over tp={tp} ranks (kv_heads a multiple of tp) nor replicated "
                "on them (tp a multiple of kv_heads); check both")
    return ""


def module_role(path: str, cls: str) -> str:
    """column / row / vocab / heads / activation / replicated (see the module docstring)."""
    name = path.rsplit(".", 1)[-1]
    if cls in _COLUMN_CLASSES or name in _COLUMN_NAMES:
        return "column"
    if cls == "RowParallelLinear" or name in _ROW_NAMES:
        return "row"
    if cls == "VocabParallelEmbedding" or name in _VOCAB_NAMES:
        return "vocab"
    if name in ("q_norm", "k_norm", "q_layernorm", "k_layernorm"):
        return "heads"
    if name == "act_fn" or (".mlp." in f".{path}." and cls in ("SiLU", "SiluAndMul", "GELU", "SwiGLU")):
        return "activation"
    return "replicated"


def split_dim(role: str, component: str, tensor_path: str, ndim: int) -> int | None:
    """The dimension ``tensor_path`` (a parameter, an input or the output) is split along for ``role``; None: whole
    on every rank (or, for a row-parallel output, a sum over ranks)."""
    name = tensor_path.rsplit(".", 1)[-1]
    if component == "parameter":
        if role in ("column", "vocab"):
            return 0
        if role == "row" and name == "weight" and ndim == 2:
            return 1
        return None
    if role == "column" and component == "output":
        return ndim - 1
    if role == "row" and component == "input":
        return ndim - 1
    if role == "heads" and ndim >= 2:
        return ndim - 2
    if role == "activation":
        return ndim - 1
    return None
