from __future__ import annotations

from autotest.consistency.classify import classify_modules, find_boundary
from autotest.consistency.dumps import ModuleEntry, TensorStat
from autotest.consistency.mapping import map_modules
from autotest.consistency.value_compare import compare_group

# Synthetic modules with given input/output/parameter differences (statistics of real tensors).


def _entries(path: str, order: int, d_in: float | None, d_out: float,
             d_par: float) -> tuple[ModuleEntry, ModuleEntry]:
    """One module's dump on both sides; ``d_in`` None: its inputs were not dumped (passed as kwargs)."""
    def stats(scale: float, comp: str, name: str) -> TensorStat:
        base = {"Max": 2.0, "Min": -2.0, "Mean": 0.1, "Norm": 8.0}
        return TensorStat(name, comp, "torch.float32", (4, 4), {k: v * (1 + scale) for k, v in base.items()}, None)

    key = f"Module.{path}.Linear.forward.0"
    sides = []
    for delta in (0.0, 1.0):
        tensors = (
            *(() if d_in is None else (stats(delta * d_in, "input", "input_args.0"),)),
            stats(delta * d_out, "output", "output.0"),
            stats(delta * d_par, "parameter", "parameters.weight"),
        )
        sides.append(ModuleEntry(key, path, "Linear", 0, order, None, tensors))
    return sides[0], sides[1]


def synthetic(*modules: tuple[str, float | None, float, float]):
    train, rollout = {}, {}
    for order, (path, d_in, d_out, d_par) in enumerate(modules):
        t, r = _entries(path, order, d_in, d_out, d_par)
        train[t.key], rollout[r.key] = t, r
    return classify_modules([compare_group(g, train, rollout) for g in map_modules(train, rollout)])


def test_divergence_entering_before_the_first_dumped_module_is_systemic():
    analyses = synthetic(("a", 0.5, 0.5, 0.0), ("b", 0.5, 0.5, 0.0))
    assert [a.bucket for a in analyses] == ["systemic_misalignment", "upstream_propagation_or_amplification"]
    assert find_boundary(analyses).module.module_path == "a"
    assert find_boundary(analyses).previous_aligned is None


def test_amplification_of_a_marginal_input_difference():
    analyses = synthetic(("a", 0.0, 1e-3, 0.0), ("b", 1e-3, 0.5, 0.0))
    assert analyses[0].bucket == "normal_aligned" and analyses[0].output == "marginal"
    assert analyses[1].bucket == "upstream_propagation_or_amplification" and analyses[1].amplification
    assert find_boundary(analyses).module.module_path == "b"


def test_parameter_difference_wins_even_with_divergent_inputs():
    analyses = synthetic(("a", 0.0, 0.0, 0.5), ("b", 0.5, 0.5, 0.5))
    assert [a.bucket for a in analyses] == ["parameter_sync_mismatch", "parameter_sync_mismatch"]
    assert "inputs differ too" in analyses[1].notes[-1]
    assert [s.module_path for s in find_boundary(analyses).suspects] == ["a", "b"]


def test_unmapped_module_is_insufficient_evidence():
    train = {"Module.x.Linear.forward.0": _entries("x", 0, 0, 0, 0)[0]}
    (group,) = map_modules(train, {})
    (analysis,) = classify_modules([compare_group(group, train, {})])
    assert analysis.bucket == "insufficient_output_evidence" and not analysis.credible


def test_the_deepest_module_whose_own_code_diverges_is_named_not_its_parent_layer():
    """A rotary embedding applied inside self_attn's own code (between q/k projections and o_proj): the difference
    first shows at o_proj's inputs; self_attn's inputs were not dumped (kwargs), its layer's were and agree."""
    analyses = synthetic(
        ("m.layers.0.input_layernorm", 0.0, 0.0, 0.0),
        ("m.layers.0.self_attn.q_proj", 0.0, 0.0, 0.0),
        ("m.layers.0.self_attn.k_proj", 0.0, 0.0, 0.0),
        ("m.layers.0.self_attn.o_proj", 0.5, 0.5, 0.0),
        ("m.layers.0.self_attn", None, 0.5, 0.0),
        ("m.layers.0", 0.0, 0.5, 0.0),
    )
    boundary = find_boundary(analyses)
    assert boundary is not None and boundary.module.module_path == "m.layers.0.self_attn"
    assert boundary.module.bucket == "module_impl_mismatch"
    assert analyses[boundary.entry_order].module_path == "m.layers.0.self_attn.o_proj"
    layer = next(a for a in analyses if a.module_path == "m.layers.0")
    assert layer.bucket == "upstream_propagation_or_amplification" and layer.explained_by == "m.layers.0.self_attn.o_proj"


def test_a_dump_narrowed_to_self_attn_still_names_self_attn():
    """The tensor pass dumps only the suspect (``model.layers.0.self_attn.``): no layer above it, so its projections'
    aligned inputs show what entered it; the difference is its own code's, never a systemic misalignment."""
    analyses = synthetic(
        ("m.layers.0.self_attn.q_proj", 0.0, 0.0, 0.0),
        ("m.layers.0.self_attn.k_proj", 0.0, 0.0, 0.0),
        ("m.layers.0.self_attn.o_proj", 0.5, 0.5, 0.0),
        ("m.layers.0.self_attn", None, 0.5, 0.0),
    )
    boundary = find_boundary(analyses)
    assert boundary is not None and boundary.module.module_path == "m.layers.0.self_attn"
    assert boundary.module.bucket == "module_impl_mismatch"
    assert analyses[boundary.entry_order].module_path == "m.layers.0.self_attn.o_proj"
    # without a child whose inputs agree, nothing shows what entered: the difference entered before the dump
    alone = synthetic(("m.layers.0.self_attn.o_proj", 0.5, 0.5, 0.0), ("m.layers.0.self_attn", None, 0.5, 0.0))
    first = find_boundary(alone)
    assert first is not None and first.module.bucket == "systemic_misalignment"


def _stale_norm(rollout_dtype: str, delta: float):
    """A final norm whose rollout weight is ``delta`` off (a sync bucket never flushed, one update in), inputs
    identical, output moved under the divergence threshold: fp32 trainer against a rollout of ``rollout_dtype``."""
    def side(delta: float, dtype: str) -> ModuleEntry:
        def stat(comp: str, name: str, scale: float) -> TensorStat:
            base = {"Max": 1.0, "Min": 0.99, "Mean": 0.999, "Norm": 8.0}
            return TensorStat(name, comp, dtype, (64,), {k: v * (1 + scale) for k, v in base.items()}, None)
        return ModuleEntry("Module.m.norm.RMSNorm.forward.0", "m.norm", "RMSNorm", 0, 0, None,
                           (stat("input", "input_args.0", 0.0), stat("output", "output.0", delta / 4),
                            stat("parameter", "parameters.weight", delta)))
    train, rollout = side(0.0, "torch.float32"), side(delta, rollout_dtype)
    train, rollout = {train.key: train}, {rollout.key: rollout}
    return classify_modules([compare_group(g, train, rollout) for g in map_modules(train, rollout)])


def test_a_same_dtype_weight_off_by_warn_level_is_a_sync_mismatch_before_its_output_diverges():
    (norm,) = _stale_norm("torch.float32", 4e-3)
    assert (norm.parameters, norm.output, norm.inputs) == ("marginal", "marginal", "aligned")
    assert norm.bucket == "parameter_sync_mismatch" and norm.credible
    assert "copies weights exactly" in norm.notes[-1]


def test_a_bf16_copy_of_an_fp32_weight_at_the_same_level_is_rounding_not_a_sync_mismatch():
    (norm,) = _stale_norm("torch.bfloat16", 5e-2)
    assert (norm.parameters, norm.output) == ("marginal", "aligned")
    assert norm.bucket == "normal_aligned" and not norm.credible
