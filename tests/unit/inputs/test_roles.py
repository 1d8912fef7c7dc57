"""Metric roles: the vocabulary, a preset per framework on a log in its shape, and the baseline's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.inputs.roles import PRESETS, ROLES, assign_roles, check_role, group_of, infer_preset, resolve_roles
from autotest.readers.reading import read_trace


def write_yaml(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path

STEPS = range(1, 6)


def _roles_of_log(trace_metrics, expected_preset):
    preset, hits, total = infer_preset(trace_metrics)
    assert preset == expected_preset, (preset, hits, total)
    return assign_roles(trace_metrics)


def test_xtuner_tracker_jsonl(tmp_path: Path):
    rows = [{"eval/accuracy": 0.4, "step": 0}]
    for s in STEPS:
        rows.append({"train_metrics/worker_0/loss": 0.1, "step": s})
        rows.append({"response/rewards/mean": 0.5, "response/response_len/mean": 30.0, "mismatch/mismatch_k3_kl": 1e-6,
                     "entropy/train": 1.2, "time/step": 3.0, "distillation/teacher_kl/gsm8k": 0.3, "step": s})
    log = tmp_path / "tracker.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    roles = _roles_of_log(read_trace(log).metrics, "xtuner")
    assert roles["response/rewards/mean"] == "reward"
    assert roles["response/response_len/mean"] == "response_length"
    assert roles["mismatch/mismatch_k3_kl"] == "mismatch"
    assert roles["entropy/train"] == "entropy"
    assert roles["eval/accuracy"] == "eval"
    assert roles["time/step"] == "step_time"
    assert roles["distillation/teacher_kl/gsm8k"] == "distill_kl/gsm8k"


def test_verl_jsonl(tmp_path: Path):
    rows = []
    for s in STEPS:
        data = {"critic/score/mean": 0.4, "critic/rewards/mean": 0.4, "response_length/mean": 210.0,
                "actor/entropy": 0.9, "actor/ppo_kl": 1e-4, "actor/kl_loss": 2e-3, "actor/pg_loss": 0.01,
                "actor/grad_norm": 0.3, "actor/lr": 1e-6, "rollout_corr/k3_kl": 1e-5,
                "training/rollout_probs_diff_mean": 1e-3, "timing_s/step": 40.0, "perf/throughput": 900.0}
        if s % 5 == 0:
            data["val-core/openai/gsm8k/acc/mean@1"] = 0.7
        rows.append({"step": s, "data": data})
    log = tmp_path / "verl.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    roles = _roles_of_log(read_trace(log, "verl").metrics, "verl")
    assert {m: roles[m] for m in ("critic/score/mean", "response_length/mean", "actor/entropy", "actor/kl_loss",
                                  "actor/ppo_kl", "rollout_corr/k3_kl", "val-core/openai/gsm8k/acc/mean@1",
                                  "timing_s/step", "perf/throughput", "actor/lr")} == {
        "critic/score/mean": "reward", "response_length/mean": "response_length", "actor/entropy": "entropy",
        "actor/kl_loss": "ref_kl", "actor/ppo_kl": "policy_kl", "rollout_corr/k3_kl": "mismatch",
        "val-core/openai/gsm8k/acc/mean@1": "eval", "timing_s/step": "step_time", "perf/throughput": "throughput",
        "actor/lr": "learning_rate"}


def _events(folder: Path, rows: dict[int, dict[str, float]]) -> Path:
    SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter
    writer = SummaryWriter(log_dir=str(folder))
    for step, values in sorted(rows.items()):
        for tag, value in values.items():
            writer.add_scalar(tag, value, step)
    writer.close()
    return folder


def test_trl_tensorboard(tmp_path: Path):
    # what transformers' TensorBoardCallback writes for GRPOTrainer: x -> train/x, eval_x -> eval/x
    rows = {s: {"train/reward": 0.3, "train/reward_std": 0.2, "train/rewards/accuracy/mean": 0.3,
                "train/completions/mean_length": 12.0, "train/kl": 0.01, "train/entropy": 2.0, "train/loss": 0.0,
                "train/grad_norm": 1.0, "train/learning_rate": 1e-5, "train/step_time": 1.5} for s in STEPS}
    rows[5].update({"eval/reward": 0.35, "eval/runtime": 2.0})
    roles = _roles_of_log(read_trace(_events(tmp_path, rows), "tensorboard").metrics, "trl")
    assert roles["train/reward"] == "reward" and roles["train/rewards/accuracy/mean"] == "reward"
    assert roles["train/reward_std"] is None
    assert roles["train/completions/mean_length"] == "response_length"
    assert roles["train/kl"] == "ref_kl" and roles["train/entropy"] == "entropy"
    assert roles["train/step_time"] == "step_time" and roles["eval/runtime"] == "step_time"
    assert roles["eval/reward"] == "eval"


def test_trl_logging_callback_names():
    # the same trainer's logs as a TrainerCallback / trainer_state.json sees them: eval keys prefixed eval_
    roles = assign_roles(["reward", "reward_std", "completions/mean_length", "kl", "entropy", "loss", "grad_norm",
                          "learning_rate", "step_time", "eval_reward", "eval_runtime", "train_samples_per_second"])
    assert roles["reward"] == "reward" and roles["eval_reward"] == "eval"
    assert roles["step_time"] == "step_time" and roles["eval_runtime"] == "step_time"
    assert roles["train_samples_per_second"] == "throughput"


def test_slime_tensorboard(tmp_path: Path):
    rows = {s: {"rollout/raw_reward": 0.5, "rollout/rewards": 0.0, "rollout/response_len/mean": 300.0,
                "rollout/entropy": 0.4, "train/loss": 0.02, "train/pg_loss": 0.02, "train/entropy_loss": 0.4,
                "train/ppo_kl": 1e-4, "train/kl_loss": 1e-3, "train/grad_norm": 0.2, "train/lr-pg_0": 1e-6,
                "train/train_rollout_logprob_abs_diff": 0.01, "perf/step_time": 60.0,
                "perf/actor_train_tok_per_s": 5e3} for s in STEPS}
    rows[5]["eval/aime"] = 0.2
    roles = _roles_of_log(read_trace(_events(tmp_path, rows), "tensorboard").metrics, "slime")
    assert roles["rollout/raw_reward"] == "reward"
    assert roles["rollout/rewards"] is None  # normalised for the advantage: not the score
    assert roles["train/train_rollout_logprob_abs_diff"] == "mismatch"
    assert roles["train/kl_loss"] == "ref_kl" and roles["train/lr-pg_0"] == "learning_rate"
    assert roles["perf/step_time"] == "step_time" and roles["perf/actor_train_tok_per_s"] == "throughput"
    assert roles["eval/aime"] == "eval"


def test_nemo_rl_tensorboard(tmp_path: Path):
    rows = {s: {"train/reward": 0.5, "train/mean_gen_tokens_per_sample": 400.0, "train/token_mult_prob_error": 1.01,
                "train/gen_kl_error": 1e-3, "train/approx_entropy": 0.5, "train/kl_penalty": 1e-3,
                "train/loss": 0.01, "train/grad_norm": 0.3, "train/lr": 1e-6,
                "timing/train/total_step_time": 50.0, "performance/tokens_per_sec_per_gpu": 1e3} for s in STEPS}
    rows[5]["validation/accuracy"] = 0.6
    roles = _roles_of_log(read_trace(_events(tmp_path, rows), "tensorboard").metrics, "nemo-rl")
    assert roles["train/token_mult_prob_error"] == "mismatch"
    assert roles["train/mean_gen_tokens_per_sample"] == "response_length"
    assert roles["validation/accuracy"] == "eval"
    assert roles["timing/train/total_step_time"] == "step_time"
    assert roles["train/kl_penalty"] == "ref_kl"


def test_every_preset_cites_sources_and_speaks_only_the_vocabulary():
    for preset in PRESETS.values():
        assert preset.sources
        assert all(check_role(role) is None for _, role in preset.rules)
    assert group_of("step_time") == group_of("throughput") == "performance"
    assert group_of("distill_kl/gsm8k") == "teacher"


def test_declared_role_wins_over_the_preset_and_the_source_is_said():
    roles = resolve_roles(["response/rewards/mean", "my/score"], {"my/score": "eval"})
    assert roles.role_of("my/score") == "eval" and roles.role_of("response/rewards/mean") == "reward"
    assert "inferred" in roles.describe() and "xtuner" in roles.describe()
    pinned = resolve_roles(["reward"], preset="trl")
    assert pinned.preset_source == "declared" and "preset trl" in pinned.describe()
    assert resolve_roles(["nothing/known"]).preset is None


BASE = {"golden": {"table": {"step_time": {1: 1.0}, "reward": {1: 0.5}}},
        "checks": [{"metric": "step_time", "method": "relative", "operator": "<", "threshold": 0.2},
                   {"metric": "reward", "method": "absolute", "operator": "<", "threshold": 0.1}]}


def test_baseline_preset_and_roles_round_trip(tmp_path: Path):
    path = write_yaml(tmp_path / "b.yaml", {**BASE, "preset": "trl", "roles": {"reward": "eval"}})
    baseline = load_baseline(path)
    assert baseline.preset == "trl" and baseline.role_map.role_of("step_time") == "step_time"
    assert baseline.role_map.role_of("reward") == "eval"
    again = tmp_path / "again.yaml"
    again.write_text(baseline_yaml(baseline))
    assert load_baseline(again).roles == {"reward": "eval"} and load_baseline(again).preset == "trl"


@pytest.mark.parametrize("extra, message", [
    ({"preset": "verrl"}, "b.yaml: preset: 'verrl' is not a preset; did you mean 'verl'?"),
    ({"preset": "megatron"}, "b.yaml: preset: 'megatron' is not a preset; write one of xtuner, verl, slime, trl, "
                             "nemo-rl"),
    ({"roles": {"reward": "rewards"}}, "b.yaml: roles.reward: 'rewards' is not a role; did you mean 'reward'?"),
    ({"roles": {"rewrd": "reward"}}, "b.yaml: roles.rewrd: no check uses this metric; did you mean 'reward'?"),
    ({"roles": {"reward": "eval/gsm8k"}}, "b.yaml: roles.reward: 'eval/gsm8k': only distill_kl names a teacher; "
                                          "write eval"),
    ({"roles": {"reward": "distill_kl/"}}, "b.yaml: roles.reward: 'distill_kl/' names no teacher; write "
                                           "distill_kl/<teacher> or distill_kl"),
    ({"roles": {"reward": 3}}, "b.yaml: roles.reward: 3 is not a text; write a non-empty text"),
    ({"roles": ["reward"]}, "b.yaml: roles: ['reward'] is not a mapping; write key: value lines"),
])
def test_bad_role_declarations_are_one_line(tmp_path: Path, extra, message):
    path = write_yaml(tmp_path / "b.yaml", {**BASE, **extra})
    with pytest.raises(UsageError) as info:
        load_baseline(path)
    assert str(info.value) == f"{path.parent}/{message}"
    assert "\n" not in str(info.value)


def test_vocabulary_is_small_and_closed():
    assert 8 <= len(ROLES) <= 18  # 14 training roles and the 4 of a step's data composition (issue 44)
    assert check_role("reward") is None and check_role("distill_kl/gsm8k") is None
    assert check_role("accuracy") is not None


def test_memory_names_of_each_framework_have_the_memory_role():
    from autotest.inputs.roles import PRESETS, group_of

    named = {"xtuner": ("memory/rss_mb", "memory/peak_rss_mb", "memory/max_memory_GB", "memory/reserved_memory_GB"),
             "verl": ("perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb"),
             "trl": ("train_mem_gpu_peaked_delta", "train_mem_cpu_alloc_delta", "eval_mem_gpu_alloc_delta")}
    for preset, metrics in named.items():
        assert all(PRESETS[preset].role_of(m) == "memory" for m in metrics), preset
    assert group_of("memory") == "memory"
    # a time metric of the same preset keeps its own role
    assert PRESETS["verl"].role_of("perf/time_per_step") == "step_time"
    assert PRESETS["trl"].role_of("eval_loss") == "eval"


def test_memory_is_never_an_accuracy_group():
    from autotest.inputs.roles import GROUPS
    from autotest.judge.evidence import ACCURACY_GROUPS, TRAINING_GROUPS
    from autotest.judge.model import NON_ACCURACY_GROUPS

    assert "memory" in GROUPS and "memory" in NON_ACCURACY_GROUPS
    assert "memory" not in ACCURACY_GROUPS and "memory" not in TRAINING_GROUPS


def test_the_data_roles_are_the_harness_names_whatever_the_preset():
    """No framework logs a step's prompt composition: the names rl-autotest defines get the data roles under any
    preset, after the preset's own patterns."""
    from autotest.inputs.roles import group_globs, resolve_roles

    for preset in ("xtuner", "verl", "trl", None):
        roles = resolve_roles(["data/repeated_prompts"], preset=preset)
        assert roles.role_of("data/repeated_prompts") == "repeated_prompts", preset
        assert roles.role_of("data/source/math") == "source_prompts" and roles.group_of("data/prompt_digest") == "data"
        assert roles.role_of("data/something_else") is None
    assert set(group_globs("data")) == {"data/distinct_prompts", "data/repeated_prompts", "data/source/*",
                                        "data/prompt_digest"}
