"""The fault catalogue: parsing, documentation and each hook's direct effect (unit level).

The end-to-end effect of every fault on a real run is in test_grpo.py.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads.faults import FAULTS, catalogue, make_fault  # noqa: E402
from autotest.workloads.grpo import GRPOConfig  # noqa: E402
from autotest.workloads.tiny_lm import TinyLMConfig, build_model  # noqa: E402

VERDICTS = {"PASS", "FAIL", "ERROR"}


def test_every_fault_is_documented_with_its_expected_outcome() -> None:
    import autotest.workloads.faults as module

    entries = catalogue()
    assert [e["name"] for e in entries] == list(FAULTS)
    for entry in entries:
        assert entry["description"], entry["name"]
        expected = entry["expected"]
        assert expected["verdict"] in VERDICTS
        assert isinstance(expected["breached"], list) and isinstance(expected["triage"], str)
        assert (expected["verdict"] == "FAIL") == bool(expected["breached"]), entry["name"]
        assert f"``{entry['name']}" in (module.__doc__ or ""), f"{entry['name']} missing from the module table"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "--fault: unknown fault 'nope'; choose one of"),
        ("crash-at", "--fault crash-at: needs an argument"),
        ("crash-at:x", "--fault crash-at: needs a positive step"),
        ("nan-at:0", "--fault nan-at: needs a positive step"),
        ("bf16-rollout:3", "--fault bf16-rollout: takes no argument"),
        ("slow-step:-1", "--fault slow-step: ARG must be a positive number"),
        ("leak-memory:0", "--fault leak-memory: ARG must be a positive number"),
        ("leak-memory:lots", "--fault leak-memory: ARG must be a positive number"),
        ("judge-bug:sideways", "--fault judge-bug:sideways: MODE must be flip or off-by-one"),
    ],
)
def test_bad_specs_are_one_line_usage_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        make_fault(spec)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("unsynced-layer:model.layers.7.", "no parameter name starts with"),
        ("perturbed-sync:model.nope.weight", "no such parameter"),
        ("rollout-impl:model.layers.9.mlp", "the model has no module"),
        ("rollout-impl:model.layers.0.self_attn", "pick an MLP (has act_fn) or an RMSNorm module"),
    ],
)
def test_args_naming_nothing_in_the_model_are_usage_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_fault(spec).check_model(build_model(TinyLMConfig(), seed=0))


def _state() -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in build_model(TinyLMConfig(), seed=0).named_parameters()}


def test_no_fault_hooks_are_identities() -> None:
    hooks = make_fault(None)
    state = _state()
    assert hooks.on_sync(state, 3) is state
    config = GRPOConfig()
    assert hooks.configure(config) is config
    adv = torch.ones(4)
    assert hooks.on_advantages(adv, adv, 2) is adv


def test_unsynced_layer_drops_its_params_after_the_initial_sync() -> None:
    hooks = make_fault("unsynced-layer")
    state = _state()
    assert hooks.on_sync(state, 0) is state
    later = hooks.on_sync(state, 1)
    dropped = set(state) - set(later)
    assert dropped and all(n.startswith("model.layers.1.mlp.") for n in dropped)
    assert {n for n in state if n.startswith("model.layers.1.mlp.")} == dropped


def test_perturbed_sync_adds_fresh_small_noise_to_one_matrix() -> None:
    hooks = make_fault("perturbed-sync", seed=0)
    state = _state()
    name = "model.layers.0.self_attn.o_proj.weight"
    one, two = hooks.on_sync(state, 1), hooks.on_sync(state, 2)
    assert all(torch.equal(one[n], state[n]) for n in state if n != name)
    diff = one[name] - state[name]
    assert 0.3 * float(state[name].std()) < float(diff.std()) < 0.7 * float(state[name].std())
    assert not torch.equal(one[name], two[name])
    assert torch.equal(hooks.on_sync(state, 1)[name], one[name])  # deterministic per version


def test_rollout_impl_changes_only_the_rollout_module() -> None:
    model = build_model(TinyLMConfig(), seed=0)
    make_fault("rollout-impl").patch_rollout_model(model)
    assert isinstance(model.model.layers[1].mlp.act_fn, torch.nn.ReLU)
    assert not isinstance(model.model.layers[0].mlp.act_fn, torch.nn.ReLU)
    norm = build_model(TinyLMConfig(), seed=0)
    make_fault("rollout-impl:model.layers.0.input_layernorm").patch_rollout_model(norm)
    assert norm.model.layers[0].input_layernorm.variance_epsilon == 1e-2


def test_config_faults_change_the_config() -> None:
    config = GRPOConfig()
    assert make_fault("bf16-rollout").configure(config).rollout_dtype == "bf16"
    assert make_fault("lr-x10").configure(config).lr == pytest.approx(config.lr * 10)
    assert make_fault("changed-init").configure(config).model.initializer_range == 0.2
    assert dataclasses.replace(make_fault("changed-init:0.05").configure(config), model=config.model) == config


def test_judge_bug_corrupts_the_reward() -> None:
    from autotest.workloads.tasks import TASKS

    judge = TASKS["digit_sum"].judge
    right, wrong = [5, 11], [6, 11]  # "5<eos>", "6<eos>"
    flip = make_fault("judge-bug").wrap_judge(judge)
    off = make_fault("judge-bug:off-by-one").wrap_judge(judge)
    assert (flip(5, right), flip(5, wrong)) == (0.0, 1.0)
    assert (off(5, right), off(5, wrong)) == (0.0, 1.0)


def test_advantage_faults() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    adv = torch.tensor([1.5, -0.5, -0.5, -0.5])
    assert torch.equal(make_fault("advantage-sign").on_advantages(adv, rewards, 4), -adv)


def test_nan_at_poisons_logprobs_from_step_k() -> None:
    hooks = make_fault("nan-at:3")
    logp = torch.zeros(2, 2)
    assert torch.equal(hooks.on_actor_logprobs(2, logp), logp)
    assert bool(hooks.on_actor_logprobs(3, logp).isnan().all())


def test_step_faults() -> None:
    with pytest.raises(RuntimeError, match="injected fault crash-at:2"):
        make_fault("crash-at:2").on_step_start(2)
    make_fault("crash-at:2").on_step_start(1)
    make_fault("hang-at:2").on_step_start(1)  # returns: only step 2 hangs


def test_leak_memory_keeps_a_resident_reference_per_step() -> None:
    from autotest.workloads.memory import current_rss_mb

    hooks = make_fault("leak-memory:16")
    before = current_rss_mb()
    for step in (1, 2, 3):
        hooks.on_step_start(step)
    assert len(hooks.kept) == 3
    assert all(t.numel() * t.element_size() == 16 * 1024 * 1024 for t in hooks.kept)
    assert all(float(t[-1]) == 1.0 for t in hooks.kept)  # filled, so every page is resident
    if before is not None:  # /proc: the three steps' 48 MiB are resident
        assert current_rss_mb() - before > 40


def test_leak_memory_touches_no_random_state() -> None:
    hooks = make_fault("leak-memory:1", seed=3)
    torch.manual_seed(0)
    hooks.on_step_start(1)
    after = torch.rand(1)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(1))
    assert hooks.expected["triage"] == "memory" and hooks.expected["breached"] == ["memory/rss_mb"]


def test_recompute_dtype_runs_only_the_recompute_under_bf16_autocast() -> None:
    hooks = make_fault("recompute-dtype")
    seen: list[tuple[bool, torch.dtype]] = []

    def fn(model, input_ids, prompt_len):  # noqa: ANN001, ANN202
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return input_ids, input_ids

    assert hooks.actor_logprob_fn(fn) is fn  # the update keeps fp32
    hooks.recompute_logprob_fn(fn)(None, torch.zeros(1), 0)
    assert seen == [(True, torch.bfloat16)] and not torch.is_autocast_enabled("cpu")


def test_decode_positions_shifts_every_decode_forward_by_k() -> None:
    positions = torch.tensor([[5], [5]])
    assert make_fault(None).decode_positions(positions, 1) is positions
    assert make_fault("decode-positions").decode_positions(positions, 1).tolist() == [[6], [6]]
    assert make_fault("decode-positions:3").decode_positions(positions, 4).tolist() == [[8], [8]]
    with pytest.raises(UsageError, match="decode-positions: needs a positive step"):
        make_fault("decode-positions:0")
