"""Faults whose mechanism only the consistency job can name: the rollout's decode path and the trainer's recompute
dtype (issue 30). Registered in :mod:`autotest.workloads.faults` beside the others.

| fault | effect | verdict | breached | triage | consistency finding |
|---|---|---|---|---|---|
| ``decode-positions[:K]`` | the rollout's decode forwards give their token position id + K (1) after the first decoded token; the prefill is right | FAIL | k3 | mismatch | ``decode_path``: recorded = the rollout's prefill recompute on the first response token, differs from the next one on (position prompt + 1), the recorded position ids K off |
| ``recompute-dtype`` | the trainer's old-log-prob recompute runs under bf16 autocast while the rollout (and the update) compute in fp32 | FAIL | k3 | mismatch | ``precision_mismatch`` on the actor side: the dumped modules' outputs bfloat16 against the rollout's float32, parameters float32 on both (autocast) |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotest.workloads.fault_hooks import INCONSISTENCY, MISMATCH, FaultHooks, LogprobFn

if TYPE_CHECKING:
    import torch


class DecodePositions(FaultHooks):
    """The rollout's decode forwards count positions from the wrong offset after the first decoded token (an
    off-by-one in the scheduler's position bookkeeping): every decode forward gives its input token position id
    cache length + K. The prefill is right, so the first response token's log-prob is too, and a full-sequence
    forward of the same tokens (every consistency dump, the trainer's recompute) never sees the bug."""

    name = "decode-positions"
    arg_help = "K, the offset added to every decode forward's position ids (default 1)"
    default_arg = "1"
    # measured (seed 0, K 1): k3 1.2e-4 at step 1; at window step 2 recorded vs recomputed agree on the prefill-scored
    # tokens (k3 0) and diverge from the first decode forward on (k3 8e-6); the recorded position ids are K off on
    # every decode-scored token
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "decode_path",
                                "module": "rollout decode path (KV cache / decode position ids)",
                                "onset_phase": "first_decode", "onset_index": 1}}

    def magnitude(self) -> float:
        return float(self.int_arg())

    def decode_positions(self, positions: torch.Tensor, decoded: int) -> torch.Tensor:
        return positions + self.int_arg()


class RecomputeDtype(FaultHooks):
    """The trainer recomputes the old log-probs under bf16 autocast (a mixed-precision flag that reaches the
    recompute) while the rollout samples in fp32: the rollout's three paths agree, the trainer's log-probs carry
    bf16 rounding, and the dumps show the actor's module outputs in bfloat16 with float32 parameters."""

    name = "recompute-dtype"
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "precision_mismatch", "module": "numerics precision (dtype)",
                                "side": "actor", "dtypes": {"actor": "torch.bfloat16", "rollout": "torch.float32"}}}

    def recompute_logprob_fn(self, fn: LogprobFn) -> LogprobFn:
        def under_autocast(model: torch.nn.Module, input_ids: torch.Tensor,
                           prompt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
            import torch

            with torch.autocast("cpu", dtype=torch.bfloat16):
                return fn(model, input_ids, prompt_len)

        return under_autocast


CONSISTENCY_FAULTS: tuple[type[FaultHooks], ...] = (DecodePositions, RecomputeDtype)
