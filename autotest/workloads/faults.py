"""Fault catalogue of the embedded workloads: named, documented, injected through hooks.

A fault is chosen with ``--fault NAME[:ARG]``. Each one is a ``FaultHooks`` subclass that
overrides only the hook points it needs; with no fault every hook is the identity, so the
training code path is the same code as without this module. Hook points (and who calls
them): ``configure`` (the entry point, on the run config), ``on_step_start`` (the driver
loop), ``on_sync`` and ``patch_rollout_model`` (the rollout engine), ``wrap_judge`` (the
training reward), ``on_advantages`` and ``on_actor_logprobs`` (the trainer),
``wrap_tracker`` (the metric log).

Each fault carries the verdict and primary triage rule (``autotest.judge.triage``) the harness must give
when it holds the run against a healthy baseline (``FaultHooks.expected``; all of them: ``catalogue()``).

| fault | effect | verdict | breached | triage |
|---|---|---|---|---|
| ``unsynced-layer[:PREFIX]`` | params under PREFIX (``model.layers.1.mlp.``) reach the rollout at init only | FAIL | k3 | mismatch (train/inference inconsistency) |
| ``perturbed-sync[:PARAM]`` | PARAM (``model.layers.0.self_attn.o_proj.weight``) gets noise (0.5 x its std) on each sync | FAIL | k3 | mismatch (train/inference inconsistency) |
| ``rollout-impl[:MODULE]`` | rollout copy of MODULE (``model.layers.1.mlp``) uses ReLU (an RMSNorm: eps 1e-2) | FAIL | k3 | mismatch (train/inference inconsistency) |
| ``bf16-rollout`` | rollout engine in bf16 (precision noise; the fp32 baseline's k3 level is ~1e-14) | FAIL | k3 (percentile) | mismatch (train/inference inconsistency) |
| ``advantage-sign`` | advantages negated | FAIL | rewards, eval | gradual (training loop) |
| ``lr-x10`` | learning rate x10 | FAIL | rewards, eval | gradual (training loop) |
| ``entropy-sign[:COEF]`` | the entropy bonus (0.01) becomes a penalty of weight COEF (0.1) | FAIL | rewards | loss-term (a loss term's sign or weight) |
| ``judge-bug[:flip\\|off-by-one]`` | training reward flipped (or checks target+1) | FAIL | rewards, eval | rewards-only (rollout/judger) |
| ``changed-init[:STD]`` | weight init std 0.02 -> STD (0.2) | FAIL | entropy (step 1), rewards | first-step (initialisation/config) |
| ``slow-step[:SECONDS]`` | sleeps SECONDS (1.5) per step | FAIL | time/step | performance-only |
| ``leak-memory[:MB]`` | keeps a reference to MB (4) of filled tensor per step | FAIL | memory/rss_mb (slope) | memory |
| ``crash-at:K`` | raises at the start of step K (exit 1) | ERROR | - | run-incomplete (crash) |
| ``hang-at:K`` | sleeps forever at the start of step K | ERROR | - | run-incomplete (hang) |
| ``nan-at:K`` | trainer log-probs NaN from step K (updates skipped) | FAIL | k3 (NaN), rewards | non-finite (numerical divergence) |
| ``truncated-tracker:K`` | half-writes the first row of step K, exits 0 | ERROR | - | run-incomplete (hidden crash) |
| ``resume-no-optimizer`` | a resumed run does not restore the Adam state | FAIL | resume: loss, rewards | resume (optimizer state) |
| ``resume-lr-restart`` | a resumed run restarts the LR schedule at step 1 | FAIL | resume: lr, loss | resume (LR schedule) |
| ``resume-rng-reset`` | a resumed run re-seeds its RNG instead of restoring it | FAIL | resume: rewards, length | resume (the prompt order: the prompts differ first) |
| ``resume-prompt-order`` | a resumed run does not restore the data sampler's state (the rest is restored) | FAIL | resume: prompt digest, rewards | resume (the prompt order) |
| ``resume-sampling-rng`` | a resumed run does not restore the rollout's sampling RNG | FAIL | resume: rewards, length | resume (the sampling RNG) |
| ``resume-rollout-weights`` | a resumed run does not load the rollout engine's weights | FAIL | resume: rewards, k3 | resume (the rollout engine's weights) |
| ``decode-positions[:K]`` | rollout decode forwards' position ids + K (1) after the first decoded token | FAIL | k3 | mismatch (train/inference inconsistency) |
| ``recompute-dtype`` | trainer's old-log-prob recompute under bf16 autocast, rollout fp32 | FAIL | k3 | mismatch (train/inference inconsistency) |
| ``log-scale[:METRIC:FACTOR]`` | METRIC (``response/response_len/mean``) logged x FACTOR (2), training unchanged | FAIL | response length | logging-units (how it is logged) |
| ``fewer-steps[:N]`` | the training loop ends N (1) steps early, exit 0; the steps it did are the clean run's | ERROR | - | run-shape (step count / schedule / config) |
| ``log-previous[:METRIC]`` | METRIC (``response/response_len/mean``) logged from the previous step, training unchanged | FAIL | resume: response length | resume-logging (how it is logged) |
| ``sync-skip-alternate`` | the sync after every odd step is skipped: even steps sample one step stale | FAIL | k3 (breaches, every 2nd step) | mismatch (train/inference inconsistency) |
| ``sync-skip-every[:N]`` | the sync after every Nth (5th) step is skipped | FAIL | k3 (breaches, every Nth step) | mismatch (train/inference inconsistency) |
| ``stale-rank[:N]`` | one of N (4) emulated rollout ranks samples with the previous sync's weights at every step | FAIL | k3 (breaches, every step) | mismatch (train/inference inconsistency) |
| ``prompts-repeated[:N]`` | every prompt of a step is handed over N (8) times (1/N the distinct prompts; N = 2 passes here) | FAIL | rewards, eval | training-data (data composition) |
| ``source-mix[:K]`` | from step K (16) every fourth prompt comes from ``digit_product`` | FAIL | rewards | training-data (data composition) |
| ``loss-per-microbatch`` | token loss averaged per micro-batch, not over the mini-batch (bitwise clean at one micro-batch) | PASS | - (the ``--micro-batches 4`` equivalence breaks) | - |

k3 is ``mismatch/mismatch_k3_kl``; rewards ``response/rewards/mean``; eval ``eval/accuracy``. The resume faults
breach the case's resume phase (``resume[match:<metric>]``), never a gate of the run that saved the checkpoint.
``decode-positions`` and ``recompute-dtype`` (:mod:`autotest.workloads.consistency_faults`) also carry the
consistency job's finding; ``log-scale``, ``fewer-steps`` and ``log-previous`` are in
:mod:`autotest.workloads.log_faults`, ``loss-per-microbatch`` in :mod:`autotest.workloads.equivalence_faults`,
``prompts-repeated`` and ``source-mix`` in :mod:`autotest.workloads.data_faults`, the sync-skip and ``stale-rank``
faults (with how one process emulates ranks, and ``expected["period"]``: the step period the verdict names) in
:mod:`autotest.workloads.intermittent_faults`.

The ``expected`` dicts below are the exact data, each with what was ``measured`` (seed 0,
default 45-step run; the raw effects are pinned by tests/unit/workloads and tests/integration/workloads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autotest.errors import UsageError
from autotest.workloads.consistency_faults import CONSISTENCY_FAULTS
from autotest.workloads.data_faults import DATA_FAULTS
from autotest.workloads.equivalence_faults import EQUIVALENCE_FAULTS
from autotest.workloads.fault_hooks import EVAL, MISMATCH, REWARDS, FaultHooks
from autotest.workloads.fault_kinds import (
    AdvantageSign,
    Bf16Rollout,
    ChangedInit,
    CrashAt,
    HangAt,
    JudgeBug,
    LeakMemory,
    EntropySign,
    LrX10,
    NanAt,
    PerturbedSync,
    RolloutImpl,
    SlowStep,
    TruncatedTracker,
    UnsyncedLayer,
)
from autotest.workloads.intermittent_faults import INTERMITTENT_FAULTS
from autotest.workloads.log_faults import LOG_FAULTS
from autotest.workloads.regressions import REGRESSIONS
from autotest.workloads.resume_faults import RESUME_FAULTS

__all__ = ["EVAL", "FAULTS", "MISMATCH", "REWARDS", "FaultHooks", "catalogue", "make_fault"]

FAULTS: dict[str, type[FaultHooks]] = {
    cls.name: cls
    for cls in (
        UnsyncedLayer, PerturbedSync, RolloutImpl, Bf16Rollout, AdvantageSign, LrX10, EntropySign,
        JudgeBug, ChangedInit, SlowStep, LeakMemory, CrashAt, HangAt, NanAt, TruncatedTracker,
        *RESUME_FAULTS,  # act only in a resumed process (autotest.workloads.resume_faults)
        *CONSISTENCY_FAULTS,  # named by the consistency job (autotest.workloads.consistency_faults)
        *LOG_FAULTS,  # change the log or the run's length, never a trained step (autotest.workloads.log_faults)
        *EQUIVALENCE_FAULTS,  # break a variant that must train the same (autotest.workloads.equivalence_faults)
        *INTERMITTENT_FAULTS,  # break the sync on some steps or one rank (autotest.workloads.intermittent_faults)
        *DATA_FAULTS,  # change the prompts the trainer is fed (autotest.workloads.data_faults)
    )
}  # fmt: skip


def make_fault(spec: str | None, seed: int = 0) -> FaultHooks:
    """The hooks for ``NAME[:ARG]`` (None or "" -> no fault); a bad spec raises ``UsageError``."""
    # the detection benchmark's regressions share the switch
    if not spec:
        return FaultHooks(None, seed)
    name, _, arg = spec.partition(":")
    known = {**FAULTS, **REGRESSIONS}
    if name not in known:
        raise UsageError(f"--fault: unknown fault {name!r}; choose one of {', '.join(sorted(FAULTS))} "
                         f"(regressions: {', '.join(sorted(REGRESSIONS))})")
    cls = known[name]
    if cls.arg_required and not arg:
        raise UsageError(f"--fault {name}: needs an argument, {name}:{cls.arg_help.split(',')[0]}")
    if arg and not cls.arg_help:
        raise UsageError(f"--fault {name}: takes no argument (got {arg!r})")
    hooks = cls(arg or None, seed)
    _validate(hooks)
    return hooks


def _validate(hooks: FaultHooks) -> None:
    """Check numeric args up front, so a bad spec fails before any work."""
    checks: dict[str, Callable[[], object]] = {
        "crash-at": hooks.int_arg, "hang-at": hooks.int_arg, "nan-at": hooks.int_arg,
        "truncated-tracker": hooks.int_arg, "decode-positions": hooks.int_arg, "fewer-steps": hooks.int_arg,
        "source-mix": hooks.int_arg, "slow-step": hooks.float_arg,
        "changed-init": hooks.float_arg, "leak-memory": hooks.float_arg,
    }  # fmt: skip
    if isinstance(hooks, JudgeBug):
        hooks.check_arg()
    if hooks.name in checks:
        checks[hooks.name]()
    if hooks.arg is not None and hasattr(hooks, "magnitude"):
        hooks.magnitude()


def catalogue() -> list[dict[str, Any]]:
    """Every fault as data: name, description, argument, default and expected outcome."""
    return [
        {
            "name": cls.name,
            "description": " ".join((cls.__doc__ or "").split()),
            "arg": cls.arg_help,
            "default_arg": cls.default_arg,
            "arg_required": cls.arg_required,
            "expected": dict(cls.expected),
        }
        for cls in FAULTS.values()
    ]
