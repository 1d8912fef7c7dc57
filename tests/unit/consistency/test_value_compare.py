from __future__ import annotations

import math

import pytest

from autotest.consistency.dumps import ModuleEntry, TensorStat
from autotest.consistency.mapping import map_modules
from autotest.consistency.value_compare import (
    combine,
    compare_group,
    compare_tensor,
    precision_class,
    stat_rel_err,
    status_of,
)


def stat_of(tensor, path="output.0", component="output", dtype="torch.float32") -> TensorStat:
    t = tensor.double()
    return TensorStat(
        path=path,
        component=component,
        dtype=dtype,
        shape=tuple(tensor.shape),
        stats={"Max": float(t.max()), "Min": float(t.min()), "Mean": float(t.mean()), "Norm": float(t.norm())},
        data_file=None,
    )


def test_relative_error_is_floored_by_the_tensor_scale():
    import torch

    x = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)  # mean exactly 0, rms 1
    t, r = stat_of(x), stat_of(x + 1e-3)
    assert stat_rel_err(t, r, "Mean") == pytest.approx(1e-3)  # not 1e-3 / 0
    assert stat_rel_err(t, r, "Max") == pytest.approx(1e-3)


@pytest.mark.parametrize(
    ("dtypes", "cls", "err", "status"),
    [
        (("torch.float32", "torch.float32"), "fp32", 5e-5, "ok"),
        (("torch.float32", "torch.float32"), "fp32", 5e-3, "warn"),
        (("torch.float32", "torch.float32"), "fp32", 5e-2, "alert"),
        (("torch.float32", "torch.bfloat16"), "bf16", 5e-3, "ok"),
        (("torch.float32", "torch.bfloat16"), "bf16", 0.5, "alert"),
        (("torch.float16", "torch.float32"), "fp16", 1e-2, "warn"),
        (("torch.int64", "torch.int64"), "int", 1.0, "alert"),
        (("torch.int64", "torch.int64"), "int", 0.0, "ok"),
    ],
)
def test_thresholds_depend_on_the_less_precise_dtype(dtypes, cls, err, status):
    assert precision_class(*dtypes) == cls
    assert status_of(err, cls) == status


def test_nan_and_missing():
    assert status_of(math.nan, "fp32") == "alert"
    assert status_of(None, "fp32") == "not_comparable"


def test_combined_statistics_equal_those_of_the_concatenation():
    import torch

    gen = torch.Generator().manual_seed(0)
    parts = [torch.randn(2, 5, n, generator=gen) for n in (64, 16, 16)]
    combined = combine([stat_of(p) for p in parts])
    whole = stat_of(torch.cat(parts, dim=-1))
    assert combined.shape == whole.shape == (2, 5, 96)
    for s in ("Max", "Min", "Mean", "Norm"):
        assert combined.stats[s] == pytest.approx(whole.stats[s], rel=1e-12)


def test_fused_rollout_module_compares_clean_against_its_unfused_training_parts():
    import torch

    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, 4, 8, generator=gen)
    weights = [torch.randn(n, 8, generator=gen) for n in (8, 4, 4)]
    outs = [hidden @ w.T for w in weights]

    def entry(key, order, inp, out, weight):
        tensors = (
            stat_of(inp, "input_args.0", "input"),
            stat_of(out),
            stat_of(weight, "parameters.weight", "parameter"),
        )
        path, cls = key.split(".", 1)[1].rsplit(".", 3)[:2]
        return ModuleEntry(key=key, path=path, cls=cls, call_index=0, order=order, parent=None, tensors=tensors)

    train = {
        k: entry(k, i, hidden, outs[i], weights[i])
        for i, k in enumerate(f"Module.m.layers.0.self_attn.{p}_proj.Linear.forward.0" for p in "qkv")
    }
    qkv_key = "Module.m.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.0"
    rollout = {qkv_key: entry(qkv_key, 0, hidden, torch.cat(outs, -1), torch.cat(weights, 0))}
    (group,) = map_modules(train, rollout)
    result = compare_group(group, train, rollout)
    assert {(t.component, t.status) for t in result.tensors} == {("input", "ok"), ("output", "ok"), ("parameter", "ok")}
    broken = dict(rollout)
    broken[qkv_key] = entry(qkv_key, 0, hidden, torch.cat(outs, -1) * 1.1, torch.cat(weights, 0))
    assert compare_group(group, train, broken).component_status("output") == "alert"


def test_integer_inputs_must_match_exactly():
    import torch

    ids = torch.tensor([[1, 5, 3]])
    t = stat_of(ids, "input_args.0", "input", "torch.int64")
    r = stat_of(ids + 1, "input_args.0", "input", "torch.int64")
    result = compare_tensor("input_args.0", "input", t, r, use_tensors=False)
    assert result.precision == "int" and result.status == "alert" and set(result.stat_rel_err) == {"Max", "Min"}
