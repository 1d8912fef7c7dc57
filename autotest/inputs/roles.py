"""Metric roles: what a logged metric means, whatever the framework calls it.

Triage, the checks ``init`` proposes, plots and the live line speak roles (reward, response length,
train–inference mismatch, eval, ...), never one framework's metric names. A baseline declares roles
per metric (``roles: {metric: role}``) and may name the ``preset`` of its framework's log vocabulary;
a metric without a declared role gets the preset's role, and without a ``preset`` the preset is
inferred from the metric names (and the report says so).

The vocabulary is closed (:data:`ROLES`); each role belongs to one triage group (:data:`GROUPS`).
``distill_kl`` may name its teacher: ``distill_kl/<teacher>`` (a preset finds the teacher in names
such as xtuner's ``distillation/teacher_kl/<teacher>``).

Presets (:data:`PRESETS`) map each framework's own log names to roles; the names come from the
frameworks' sources, cited on each preset. Patterns are shell globs (``*`` matches any text,
``/`` included), tried in order; the first match wins.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Iterable, Mapping

from autotest.inputs.schema import Section

#: role -> (triage group, one-line meaning). Closed: a baseline naming another role is an error.
ROLES: Mapping[str, tuple[str, str]] = MappingProxyType({
    "reward": ("reward", "mean reward (score) of the training rollouts"),
    "response_length": ("rollout", "mean length of the sampled responses"),
    "entropy": ("rollout", "entropy of the policy on the sampled tokens"),
    "mismatch": ("consistency", "train–inference mismatch of the sampled tokens' log-probs (k3, |diff|, ratio)"),
    "eval": ("eval", "accuracy or score on the eval set (the eval path)"),
    "distill_kl": ("teacher", "distillation KL / loss against the teachers (per teacher: distill_kl/<teacher>)"),
    "ref_kl": ("dynamics", "KL of the policy to the reference model (KL loss or penalty)"),
    "policy_kl": ("dynamics", "KL between the policy before and after the update (PPO's approx KL)"),
    "loss": ("dynamics", "the training loss (policy-gradient loss)"),
    "grad_norm": ("dynamics", "gradient norm before clipping"),
    "learning_rate": ("dynamics", "the optimiser's learning rate"),
    "step_time": ("performance", "wall time of a step or of a phase of it (seconds)"),
    "throughput": ("performance", "tokens or samples per second"),
    "memory": ("memory", "memory of the training process per step: resident set or device memory, current or peak"),
    "distinct_prompts": ("data", "distinct prompts (dataset rows) among a step's training prompts"),
    "repeated_prompts": ("data", "a step's training prompts handed over again within the step (prompts - distinct)"),
    "source_prompts": ("data", "a step's training prompts from one source (data_source, task or dataset)"),
    "prompt_digest": ("data", "a digest (hash) of a step's training prompts in order; equal means the same prompts"),
})

#: triage groups, in the order evidence tables list them
GROUPS = ("reward", "eval", "rollout", "dynamics", "teacher", "consistency", "performance", "memory", "data")

TEACHER_SEPARATOR = "/"


def base_role(role: str) -> str:
    """``distill_kl/<teacher>`` -> ``distill_kl``; any other role unchanged."""
    return role.split(TEACHER_SEPARATOR, 1)[0]


def group_of(role: str | None) -> str | None:
    """The triage group of ``role`` (``performance`` for step_time, ...), or None for no role."""
    return ROLES[base_role(role)][0] if role else None


def check_role(role: object) -> tuple[str, str] | None:
    """None if ``role`` is in the vocabulary, else (problem, fix) with a did-you-mean."""
    vocabulary = f"write one of {', '.join(ROLES)}"
    if not isinstance(role, str) or not role:
        return f"{role!r} is not a role name", vocabulary
    base, _, teacher = role.partition(TEACHER_SEPARATOR)
    if base not in ROLES:
        close = difflib.get_close_matches(base, list(ROLES), n=1)
        return f"{role!r} is not a role", f"did you mean {close[0]!r}?" if close else vocabulary
    if TEACHER_SEPARATOR in role and base != "distill_kl":
        return f"{role!r}: only distill_kl names a teacher", f"write {base}"
    if TEACHER_SEPARATOR in role and not teacher:
        return f"{role!r} names no teacher", "write distill_kl/<teacher> or distill_kl"
    return None


@dataclass(frozen=True)
class Preset:
    """One framework's log vocabulary: ordered (glob, role) rules and where the names come from."""

    name: str
    title: str
    #: the framework's sources the names were taken from (repository, file)
    sources: tuple[str, ...]
    rules: tuple[tuple[str, str], ...]
    #: the glob whose ``*`` is the teacher's name for a distill_kl metric
    teacher_glob: str | None = None

    def role_of(self, metric: str) -> str | None:
        for pattern, role in self.rules:
            if fnmatchcase(metric, pattern):
                if role == "distill_kl" and self.teacher_glob and fnmatchcase(metric, self.teacher_glob):
                    prefix = self.teacher_glob.split("*", 1)[0]
                    return f"distill_kl/{metric[len(prefix):]}"
                return role
        return None


def _rules(*pairs: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    for _, role in pairs:
        assert check_role(role) is None, role
    return pairs


PRESETS: Mapping[str, Preset] = MappingProxyType({p.name: p for p in (
    Preset("xtuner", "xtuner (RL trainer, tracker.jsonl / TensorBoard)",
           ("InternLM/xtuner xtuner/v1/train/rl_trainer.py (response/*, time/*, eval/*)",
            "InternLM/xtuner xtuner/v1/rl (mismatch/*, entropy/*)",
            "xtuner recipe/on_policy_distillation (distillation/*)",
            "InternLM/xtuner xtuner/v1/train/trainer.py (memory/max_memory_GB, memory/reserved_memory_GB)"),
           _rules(("response/rewards/*", "reward"), ("response/response_len/*", "response_length"),
                  ("mismatch/*", "mismatch"), ("entropy/*", "entropy"), ("eval/*", "eval"),
                  ("distillation/*", "distill_kl"), ("time/*", "step_time"), ("memory/*", "memory")),
           teacher_glob="distillation/teacher_kl/*"),
    Preset("verl", "verl (PPO/GRPO ray trainer, JSONL or TensorBoard)",
           ("volcengine/verl verl/trainer/ppo/metric_utils.py (critic/*, response_length/*, timing_s/*, perf/*)",
            "volcengine/verl verl/workers/actor/dp_actor.py (actor/*)",
            "volcengine/verl verl/trainer/ppo/ray_trainer.py (val-core/*, val-aux/*, actor/reward_kl_penalty)",
            "volcengine/verl verl/trainer/ppo/rollout_corr_helper.py (rollout_corr/*)",
            "volcengine/verl verl/utils/debug/metrics.py (training/rollout_probs_diff_*)",
            "volcengine/verl verl/workers/fsdp_workers.py (perf/max_memory_allocated_gb, perf/max_memory_reserved_gb, "
            "perf/cpu_memory_used_gb)"),
           _rules(("critic/score/*", "reward"), ("critic/rewards/*", "reward"),
                  ("response_length/*", "response_length"), ("actor/entropy", "entropy"),
                  ("rollout_corr/*", "mismatch"), ("training/rollout_probs_diff_*", "mismatch"),
                  ("val-core/*", "eval"), ("val-aux/*", "eval"),
                  ("actor/kl_loss", "ref_kl"), ("actor/reward_kl_penalty", "ref_kl"), ("actor/ppo_kl", "policy_kl"),
                  ("actor/pg_loss", "loss"), ("actor/grad_norm", "grad_norm"), ("actor/lr", "learning_rate"),
                  ("timing_s/*", "step_time"), ("perf/time_per_step", "step_time"),
                  ("perf/throughput", "throughput"), ("perf/*memory*", "memory"),
                  ("actor/perf/*memory*", "memory"))),
    Preset("slime", "slime (Megatron + SGLang, wandb / TensorBoard scalars)",
           ("THUDM/slime slime/observability/rollout_metrics.py (rollout/*, perf/*, eval/*)",
            "THUDM/slime slime/observability/train_metric_utils.py (rollout/raw_reward, rollout/entropy, ...)",
            "THUDM/slime slime/backends/megatron_utils/loss.py (train/loss, train/pg_loss, train/ppo_kl, ...)"),
           _rules(("rollout/raw_reward", "reward"), ("rollout/response_len/*", "response_length"),
                  ("rollout/entropy", "entropy"), ("train/entropy_loss", "entropy"),
                  ("train/train_rollout_logprob_abs_diff", "mismatch"), ("rollout/opd_reverse_kl", "distill_kl"),
                  ("eval/*", "eval"),
                  ("train/kl_loss", "ref_kl"), ("train/ppo_kl", "policy_kl"),
                  ("train/loss", "loss"), ("train/pg_loss", "loss"), ("train/grad_norm", "grad_norm"),
                  ("train/lr-pg_*", "learning_rate"), ("perf/*tok_per_s", "throughput"),
                  ("perf/*tokens_per_*", "throughput"), ("perf/*_time", "step_time"))),
    Preset("trl", "TRL / Hugging Face Trainer (trainer_state.json log_history, logging callback, TensorBoard)",
           ("huggingface/trl trl/trainer/grpo_trainer.py (reward, reward_std, rewards/<func>/mean, "
            "completions/*, entropy, kl, sampling/*, step_time; eval rows prefixed eval_)",
            "huggingface/transformers trainer.py (loss, grad_norm, learning_rate, *_runtime, "
            "*_samples_per_second) and integrations TensorBoardCallback (x -> train/x, eval_x -> eval/x)",
            "huggingface/transformers trainer_utils.py TrainerMemoryTracker (<stage>_mem_cpu_*, <stage>_mem_gpu_* "
            "with skip_memory_metrics=False)"),
           _rules(("reward", "reward"), ("train/reward", "reward"), ("rewards/*/mean", "reward"),
                  ("train/rewards/*/mean", "reward"),
                  ("completions/mean_length", "response_length"), ("train/completions/mean_length", "response_length"),
                  ("completions/*length", "response_length"), ("train/completions/*length", "response_length"),
                  ("entropy", "entropy"), ("train/entropy", "entropy"),
                  ("sampling/*", "mismatch"), ("train/sampling/*", "mismatch"),
                  ("kl", "ref_kl"), ("train/kl", "ref_kl"),
                  ("loss", "loss"), ("train/loss", "loss"), ("grad_norm", "grad_norm"), ("train/grad_norm", "grad_norm"),
                  ("learning_rate", "learning_rate"), ("train/learning_rate", "learning_rate"),
                  ("step_time", "step_time"), ("train/step_time", "step_time"),
                  ("*_runtime", "step_time"), ("*/runtime", "step_time"),
                  ("*samples_per_second", "throughput"), ("*steps_per_second", "throughput"),
                  ("*_mem_cpu*", "memory"), ("*_mem_gpu*", "memory"),
                  ("eval_*", "eval"), ("eval/*", "eval"))),
    Preset("nemo-rl", "NeMo-RL (GRPO, logger prefixes train/, validation/, timing/, performance/)",
           ("NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py (train/reward, train/mean_gen_tokens_per_sample, "
            "validation/accuracy, timing/train/total_step_time, performance/*)",
            "NVIDIA-NeMo/RL nemo_rl/algorithms/loss/loss_functions.py (token_mult_prob_error, gen_kl_error, "
            "approx_entropy, kl_penalty)"),
           _rules(("train/reward", "reward"), ("train/mean_gen_tokens_per_sample", "response_length"),
                  ("train/token_mult_prob_error", "mismatch"), ("train/gen_kl_error", "mismatch"),
                  ("train/approx_entropy", "entropy"), ("train/kl_penalty", "ref_kl"),
                  ("train/loss", "loss"), ("train/grad_norm", "grad_norm"), ("train/lr", "learning_rate"),
                  ("validation/*", "eval"), ("timing/*", "step_time"),
                  ("performance/*per_sec*", "throughput"))),
)})


#: names for the roles no framework logs (a step's data composition, issue 44), defined by the harness and logged by
#: its embedded workloads: any log that uses them gets these roles, whatever its preset (tried after the preset)
HARNESS_NAMES = Preset("rl-autotest", "names rl-autotest defines where no framework logs the quantity",
                       ("rl-autotest autotest/workloads/data_metrics.py (data/*)",),
                       _rules(("data/distinct_prompts", "distinct_prompts"),
                              ("data/repeated_prompts", "repeated_prompts"), ("data/source/*", "source_prompts"),
                              ("data/prompt_digest", "prompt_digest")))


def group_globs(group: str) -> tuple[str, ...]:
    """Every preset's patterns for the roles of ``group`` (e.g. ``data``): what a comparison reads beside the
    checked metrics so that a reading can see them."""
    return tuple(dict.fromkeys(p for preset in (*PRESETS.values(), HARNESS_NAMES) for p, role in preset.rules
                               if group_of(role) == group))


def check_preset(name: object) -> tuple[str, str] | None:
    """None if ``name`` is a preset, else (problem, fix) with a did-you-mean."""
    if isinstance(name, str) and name in PRESETS:
        return None
    close = difflib.get_close_matches(str(name), list(PRESETS), n=1)
    return f"{name!r} is not a preset", f"did you mean {close[0]!r}?" if close else f"write one of {', '.join(PRESETS)}"


def infer_preset(metrics: Iterable[str]) -> tuple[str | None, int, int]:
    """(the preset naming most of ``metrics``, how many it names, how many metrics); None if it names none.

    A tie goes to the preset listed first in :data:`PRESETS`.
    """
    names = sorted(set(metrics))
    counts = Counter({p.name: sum(p.role_of(m) is not None for m in names) for p in PRESETS.values()})
    best = max(PRESETS, key=lambda n: (counts[n], -list(PRESETS).index(n)))
    return (best if counts[best] else None), counts[best], len(names)


@dataclass(frozen=True)
class RoleMap:
    """The role of each metric of one baseline (or log): declared roles first, then the preset's."""

    declared: Mapping[str, str] = field(default_factory=dict)
    preset: str | None = None
    #: how the preset was chosen: "declared" (the baseline's ``preset:``), "inferred", or "" (none)
    preset_source: str = ""
    #: for an inferred preset: how many of how many metric names it matched
    matched: tuple[int, int] = (0, 0)

    def role_of(self, metric: str | None) -> str | None:
        """The role of ``metric`` (``distill_kl/<teacher>`` where a teacher is known), or None."""
        if not metric:
            return None
        if metric in self.declared:
            return self.declared[metric]
        found = PRESETS[self.preset].role_of(metric) if self.preset else None
        return found if found is not None else HARNESS_NAMES.role_of(metric)

    def base_role_of(self, metric: str | None) -> str | None:
        role = self.role_of(metric)
        return base_role(role) if role else None

    def group_of(self, metric: str | None) -> str | None:
        return group_of(self.role_of(metric))

    def teacher_of(self, metric: str | None) -> str | None:
        role = self.role_of(metric)
        return role.partition(TEACHER_SEPARATOR)[2] or None if role else None

    def describe(self) -> str:
        """One line for the report: where the roles came from."""
        declared = f"{len(self.declared)} declared in the baseline" if self.declared else "none declared"
        if self.preset_source == "declared":
            return f"metric roles: {declared}, the rest from preset {self.preset} (the baseline's preset:)"
        if self.preset_source == "inferred":
            return (f"metric roles: {declared}, the rest from preset {self.preset}, inferred from the metric names "
                    f"({self.matched[0]} of {self.matched[1]} match it; write preset: to pin it)")
        return f"metric roles: {declared}; no preset matches the metric names (write roles: or preset:)"


def resolve_roles(metrics: Iterable[str], declared: Mapping[str, str] | None = None,
                  preset: str | None = None) -> RoleMap:
    """The :class:`RoleMap` for ``metrics``: ``declared`` roles, then ``preset`` (inferred when None)."""
    declared = MappingProxyType(dict(declared or {}))
    if preset is not None:
        assert preset in PRESETS, preset
        return RoleMap(declared, preset, "declared")
    undeclared = [m for m in metrics if m not in declared]
    inferred, hits, total = infer_preset(undeclared)
    return RoleMap(declared, inferred, "inferred" if inferred else "", (hits, total))


def parse_roles(sec: "Section", checked: set[str]) -> tuple[str | None, dict[str, str]]:
    """The baseline's ``preset:`` and ``roles:`` keys, validated: one line naming file and key per mistake."""
    preset = None
    if "preset" in sec.data:
        preset = sec.text("preset")
        problem = check_preset(preset)
        if problem:
            sec.fail("preset", *problem)
    declared = sec.str_map("roles", default={})
    for metric, role in declared.items():
        if metric not in checked:
            close = difflib.get_close_matches(metric, sorted(checked), n=1)
            sec.fail(f"roles.{metric}", "no check uses this metric",
                     f"did you mean {close[0]!r}?" if close else "fix the name or remove it")
        problem = check_role(role)
        if problem:
            sec.fail(f"roles.{metric}", *problem)
    return preset, declared


def assign_roles(metrics: Iterable[str], preset: str | None = None) -> dict[str, str | None]:
    """metric -> role for every name in ``metrics`` (what ``init`` lists); preset inferred when None."""
    names = sorted(set(metrics))
    roles = resolve_roles(names, preset=preset)
    return {m: roles.role_of(m) for m in names}
