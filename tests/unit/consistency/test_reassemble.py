"""Per-rank dumps written here in MSProbe's layout from known whole tensors: the reassembled dump must give the
whole tensors back, record each rank's slice, and name every rank disagreement and everything it cannot place."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from autotest.consistency.dumps import find_dump_dirs, load_tensor, read_dump
from autotest.consistency.layout import SideLayout
from autotest.consistency.rank_groups import plan_groups
from autotest.consistency.reassemble import assemble_side, require_fit
from autotest.errors import UsageError

HEADS, KV_HEADS, HD, HIDDEN = 4, 2, 2, 3
QKV = "Module.model.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.0"
K_NORM = "Module.model.layers.0.self_attn.k_norm.RMSNorm.forward.0"
O_PROJ = "Module.model.layers.0.self_attn.o_proj.RowParallelLinear.forward.0"
NORM = "Module.model.layers.0.input_layernorm.RMSNorm.forward.0"
GATE_UP = "Module.model.layers.0.mlp.gate_up_proj.MergedColumnParallelLinear.forward.0"


def _leaf(folder: Path, name: str, tensor: torch.Tensor | None, stats_of: torch.Tensor) -> dict:
    t = stats_of.double()
    leaf = {"type": "torch.Tensor", "dtype": str(stats_of.dtype), "shape": list(stats_of.shape),
            "Max": float(t.max()), "Min": float(t.min()), "Mean": float(t.mean()), "Norm": float(t.norm())}
    if tensor is not None:
        (folder / "dump_tensor_data").mkdir(parents=True, exist_ok=True)
        torch.save(tensor, folder / "dump_tensor_data" / name)
        leaf["data_name"] = name
    return leaf


def write_rank(folder: Path, modules: dict[str, dict[str, torch.Tensor]], tensors: bool = True) -> None:
    """One MSProbe rank folder: per module key, its ``input``, ``output`` and ``weight`` tensors."""
    data = {}
    for key, parts in modules.items():
        body: dict = {}
        for part, tensor in parts.items():
            leaf = _leaf(folder, f"{key}.{part}.pt", tensor if tensors else None, tensor)
            if part == "weight":
                body.setdefault("parameters", {})["weight"] = leaf
            else:
                body["input_args" if part == "input" else "output"] = [leaf]
        data[key] = body
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L0", "data": data}))


def _whole_model(seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 5, HIDDEN, generator=gen)
    qkv_w = torch.randn((HEADS + 2 * KV_HEADS) * HD, HIDDEN, generator=gen)
    k = (x @ qkv_w[HEADS * HD:(HEADS + KV_HEADS) * HD].T).view(1, 5, KV_HEADS, HD)
    attn = torch.randn(1, 5, HEADS * HD, generator=gen)
    o_w = torch.randn(HIDDEN, HEADS * HD, generator=gen)
    gate_up_w = torch.randn(8, HIDDEN, generator=gen)
    return {NORM: {"input": x, "output": x * 2},
            QKV: {"input": x, "output": x @ qkv_w.T, "weight": qkv_w},
            K_NORM: {"input": k, "output": k / 2},
            O_PROJ: {"input": attn, "output": attn @ o_w.T, "weight": o_w},
            GATE_UP: {"input": x, "output": x @ gate_up_w.T, "weight": gate_up_w}}


def _rank_slice(whole: dict[str, dict[str, torch.Tensor]], rank: int, tp: int) -> dict[str, dict[str, torch.Tensor]]:
    """What rank ``rank`` of ``tp`` holds, sliced as vLLM slices (kv heads replicated when tp > KV_HEADS)."""
    replicas = max(1, tp // KV_HEADS)
    kv_heads = range((rank // replicas) * max(1, KV_HEADS // tp), (rank // replicas + 1) * max(1, KV_HEADS // tp))
    q_rows = torch.arange(rank * HEADS // tp * HD, (rank + 1) * HEADS // tp * HD)
    k_rows = torch.cat([torch.arange(HEADS * HD + h * HD, HEADS * HD + (h + 1) * HD) for h in kv_heads])
    v_rows = k_rows + KV_HEADS * HD
    rows = torch.cat((q_rows, k_rows, v_rows))
    inter = 4 // tp
    gu_rows = torch.cat((torch.arange(rank * inter, (rank + 1) * inter), torch.arange(4 + rank * inter, 4 + (rank + 1) * inter)))
    cols = q_rows
    qkv, o, gu = whole[QKV], whole[O_PROJ], whole[GATE_UP]
    return {NORM: dict(whole[NORM]),
            QKV: {"input": qkv["input"], "output": qkv["output"][..., rows], "weight": qkv["weight"][rows]},
            K_NORM: {k: v[:, :, list(kv_heads)] for k, v in whole[K_NORM].items()},
            O_PROJ: {"input": o["input"][..., cols], "output": o["output"], "weight": o["weight"][:, cols]},
            GATE_UP: {"input": gu["input"], "output": gu["output"][..., gu_rows], "weight": gu["weight"][gu_rows]}}


def _dump(root: Path, tp: int, tensors: bool = True, change=None) -> Path:
    whole = _whole_model()
    for rank in range(tp):
        held = _rank_slice(whole, rank, tp)
        if change:
            change(rank, held)
        write_rank(root / "step3" / f"rank{rank}", held, tensors)
    return root


def _reassembled(assembly) -> dict[str, dict[str, torch.Tensor]]:
    dump = read_dump(find_dump_dirs(assembly.root)[0])
    out = {}
    for key, entry in dump.entries.items():
        out[key] = {t.path.split(".")[0].replace("input_args", "input").replace("parameters", "weight"): t
                    for t in entry.tensors}
    return out


@pytest.mark.parametrize("tp", [2, 4])
def test_tensor_parallel_ranks_give_the_whole_tensors_back(tmp_path: Path, tp: int) -> None:
    root = _dump(tmp_path / "dump", tp)
    assembly = assemble_side(root, "rollout", SideLayout(heads=HEADS, kv_heads=KV_HEADS), tmp_path / "out")
    assert [g.describe() for g in assembly.groups] == [
        f"tp={tp}, pp=1 over ranks {', '.join(map(str, range(tp)))} (inferred)"]
    assert assembly.findings == [] and assembly.root == tmp_path / "out" / "reassembled" / "rollout"
    got, whole = _reassembled(assembly), _whole_model()
    for key, parts in whole.items():
        for part, tensor in parts.items():
            assert torch.allclose(load_tensor(got[key][part]), tensor.double(), atol=1e-6), (key, part)
    qkv_weight = got[QKV]["weight"]
    assert qkv_weight.shards[0] == (0, 0, 0, HEADS // tp * HD, 0)  # rank 0's q rows come first
    if tp == 4:  # rank 1 holds kv head 0 again: its k slice sits where rank 0's does
        k_slices = [s for s in qkv_weight.shards if s[2] == HEADS * HD]
        assert [s[0] for s in k_slices] == [0, 1]


def test_a_kv_replica_that_differs_is_named_with_both_ranks(tmp_path: Path) -> None:
    def stale_k(rank: int, held: dict) -> None:
        if rank == 1:
            held[QKV]["weight"] = held[QKV]["weight"].clone()
            held[QKV]["weight"][HD:2 * HD] += 1.0  # rank 1's k rows (its q is one head of HD rows)

    assembly = assemble_side(_dump(tmp_path / "dump", 4, change=stale_k), "rollout",
                             SideLayout(heads=HEADS, kv_heads=KV_HEADS), tmp_path / "out")
    found = [(f.module, f.ranks, f.kind) for f in assembly.findings]
    assert ("model.layers.0.self_attn.qkv_proj", (0, 1), "replicas_disagree") in found


def test_a_replicated_module_that_differs_between_ranks_is_a_finding(tmp_path: Path) -> None:
    def drift(rank: int, held: dict) -> None:
        if rank == 1:
            held[O_PROJ]["output"] = held[O_PROJ]["output"] * 0.5  # a partial sum kept: the all-reduce did not run

    assembly = assemble_side(_dump(tmp_path / "dump", 2, change=drift), "rollout",
                             SideLayout(heads=HEADS, kv_heads=KV_HEADS), tmp_path / "out")
    [finding] = assembly.findings
    assert (finding.module, finding.ranks, finding.kind) == ("model.layers.0.self_attn.o_proj", (0, 1),
                                                             "replicas_disagree")
    assert "all-reduce did not run" in finding.detail


def test_declared_partial_sums_are_added(tmp_path: Path) -> None:
    def halve(rank: int, held: dict) -> None:
        held[O_PROJ]["output"] = held[O_PROJ]["output"] / 2  # two ranks' partial sums add up to the whole

    assembly = assemble_side(_dump(tmp_path / "dump", 2, change=halve), "rollout",
                             SideLayout(heads=HEADS, kv_heads=KV_HEADS, partial=("*.o_proj",)), tmp_path / "out")
    assert assembly.findings == []
    whole = _whole_model()[O_PROJ]["output"].double()
    assert torch.allclose(load_tensor(_reassembled(assembly)[O_PROJ]["output"]), whole, atol=1e-6)


def test_statistics_only_dumps_combine_splits_and_name_what_they_cannot(tmp_path: Path) -> None:
    assembly = assemble_side(_dump(tmp_path / "dump", 4, tensors=False), "rollout",
                             SideLayout(heads=HEADS, kv_heads=KV_HEADS), tmp_path / "out")
    got, whole = _reassembled(assembly), _whole_model()
    gate_up = whole[GATE_UP]["output"].double()
    stats = got[GATE_UP]["output"].stats
    assert math.isclose(stats["Norm"], float(gate_up.norm()), rel_tol=1e-6)
    assert math.isclose(stats["Mean"], float(gate_up.mean()), rel_tol=1e-6, abs_tol=1e-9)
    assert (stats["Max"], stats["Min"]) == pytest.approx((float(gate_up.max()), float(gate_up.min())))
    k_norm = got[K_NORM]["output"]  # one kv head per pair of ranks: each counted once
    assert math.isclose(k_norm.stats["Norm"], float(whole[K_NORM]["output"].double().norm()), rel_tol=1e-6)
    not_placed = {(f.module, f.detail.split(":")[0]) for f in assembly.findings if f.kind == "not_placed"}
    assert ("model.layers.0.self_attn.qkv_proj", "output.0") in not_placed  # q and replicated kv in one statistic
    assert QKV in got and "output" not in got[QKV]


def test_a_fused_qkv_without_head_counts_is_not_placed(tmp_path: Path) -> None:
    assembly = assemble_side(_dump(tmp_path / "dump", 2), "rollout", SideLayout(), tmp_path / "out")
    details = [f.detail for f in assembly.findings if f.module.endswith("qkv_proj")]
    assert details and all("declare heads=N,kv_heads=N" in d for d in details)


def test_data_parallel_ranks_stay_units_of_their_own(tmp_path: Path) -> None:
    whole = _whole_model()
    for rank in range(2):
        write_rank(tmp_path / "dump" / "step3" / f"rank{rank}", whole)
    assembly = assemble_side(tmp_path / "dump", "train", SideLayout(), tmp_path / "out")
    assert not assembly.reassembled and assembly.root == tmp_path / "dump"


def test_pipeline_stages_join_in_layer_order_and_a_changed_hand_off_is_named(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(1)
    h0, h1 = torch.randn(1, 4, HIDDEN, generator=gen), torch.randn(1, 4, HIDDEN, generator=gen)
    embed = "Module.model.embed_tokens.Embedding.forward.0"
    layer = "Module.model.layers.{}.Qwen3DecoderLayer.forward.0"
    write_rank(tmp_path / "dump" / "step3" / "rank0", {embed: {"output": h0}, layer.format(0): {"input": h0,
                                                                                                "output": h1}})
    write_rank(tmp_path / "dump" / "step3" / "rank1", {layer.format(1): {"input": h1 - h0, "output": h1}})
    assembly = assemble_side(tmp_path / "dump", "train", SideLayout(), tmp_path / "out")
    assert [g.describe() for g in assembly.groups] == ["tp=1, pp=2 over ranks 0, 1 (inferred)"]
    assert list(_reassembled(assembly)) == [embed, layer.format(0), layer.format(1)]
    [finding] = assembly.findings
    assert (finding.module, finding.ranks, finding.kind) == ("model.layers.1", (1,), "stage_boundary")


def test_a_declared_layout_that_does_not_fit_the_ranks_is_one_line(tmp_path: Path) -> None:
    root = _dump(tmp_path / "dump", 2)
    layout = SideLayout(tp=4)
    assembly = assemble_side(root, "rollout", layout, tmp_path / "out")
    assert not assembly.reassembled and "does not fit 2 rank folders" in assembly.notes[0]
    with pytest.raises(UsageError, match=r"^--rollout-layout tp=4: .*does not fit 2 rank folders"):
        require_fit(layout, "rollout", assembly)


def test_declared_groups_number_ranks_tensor_parallel_first() -> None:
    dumps = dict.fromkeys(range(8))
    groups, note = plan_groups(dumps, SideLayout(tp=2, pp=2))  # type: ignore[arg-type]
    assert note == "" and [g.stages for g in groups] == [((0, 1), (4, 5)), ((2, 3), (6, 7))]
    groups, note = plan_groups(dumps, SideLayout(ep=4))  # type: ignore[arg-type]
    assert [(g.stages, g.expert_parallel, g.tp) for g in groups] == [(((0, 1, 2, 3),), True, 1),
                                                                     (((4, 5, 6, 7),), True, 1)]
    groups, note = plan_groups(dumps, SideLayout(ep=2, tp=2))  # type: ignore[arg-type]
    assert groups == [] and "expert parallel together with tensor parallel" in note


def test_a_malformed_shards_field_is_one_line(tmp_path: Path) -> None:
    write_rank(tmp_path / "rank0", {NORM: {"output": torch.ones(2)}})
    doc = json.loads((tmp_path / "rank0" / "dump.json").read_text())
    doc["data"][NORM]["output"][0]["shards"] = [[0, 0, 0]]
    (tmp_path / "rank0" / "dump.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=r"dump.json: .*shards \[\[0, 0, 0\]\] is not a list of \[rank, dim"):
        read_dump(tmp_path / "rank0")


def test_expert_parallel_ranks_join_their_experts_by_id_in_completion_order(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(1, 4, HIDDEN, generator=gen)
    w = [torch.randn(HIDDEN, HIDDEN, generator=gen) for _ in range(4)]
    attn = "Module.model.layers.0.self_attn.o_proj.Linear.forward.0"
    expert = "Module.model.layers.0.mlp.experts.{}.Linear.forward.0"
    moe = "Module.model.layers.0.mlp.Qwen3MoeSparseMoeBlock.forward.0"
    shared = {attn: {"input": x, "output": x @ w[0].T, "weight": w[0]}}
    for rank in range(2):  # rank r holds experts 2r and 2r+1, and the same attention as the other rank
        held = dict(shared)
        held.update({expert.format(e): {"input": x, "output": x @ w[e].T, "weight": w[e]} for e in (2 * rank, 2 * rank + 1)})
        held[moe] = {"input": x, "output": x}
        write_rank(tmp_path / "dump" / "step3" / f"rank{rank}", held)
    assembly = assemble_side(tmp_path / "dump", "rollout", SideLayout(), tmp_path / "out")
    assert [g.describe() for g in assembly.groups] == ["tp=1, ep=2, pp=1 over ranks 0, 1 (inferred)"]
    assert assembly.findings == []
    got = _reassembled(assembly)
    assert list(got) == [attn, *(expert.format(e) for e in range(4)), moe]
    assert torch.equal(load_tensor(got[expert.format(3)]["weight"]), w[3].double())
    assert torch.equal(load_tensor(got[attn]["weight"]), w[0].double())  # whole on each rank, not concatenated
