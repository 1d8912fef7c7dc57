"""Faults that break an equivalence class of the embedded GRPO workload (issue 32): variants that must train the
same (``--micro-batches N``, ``--padding longest``) stop doing so, while the case's default configuration trains
exactly as a clean run. Registered in :mod:`autotest.workloads.faults` beside the others.

| fault | effect | verdict | breached | triage | equivalence broken |
|---|---|---|---|---|---|
| ``loss-per-microbatch`` | the token loss is averaged per micro-batch, then over the micro-batches, instead of per token over the mini-batch | PASS (bitwise clean at the default one micro-batch per mini-batch) | - | - | ``--micro-batches 1`` against ``--micro-batches 4`` |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotest.workloads.fault_hooks import FaultHooks

if TYPE_CHECKING:
    import torch


class LossPerMicrobatch(FaultHooks):
    """The loss is a token mean per micro-batch, averaged over the micro-batches, instead of a token mean over the
    whole mini-batch (the gradient-accumulation normalisation bug): a micro-batch of short responses weighs as
    much as one of long responses. With one micro-batch per mini-batch (the case's default) the two are the same
    numbers, so the run is bitwise clean; split into N > 1 micro-batches it trains differently."""

    name = "loss-per-microbatch"
    # against the golden the default run is the clean run (PASS); the equivalence check of the variant catches it
    expected = {"verdict": "PASS", "breached": [], "triage": "",
                "equivalence": {"base": ["--micro-batches", "1"], "variant": ["--micro-batches", "4"],
                                "same": False}}

    def loss_normaliser(self, num_tokens: torch.Tensor, micro_mask: torch.Tensor, micro_batches: int) -> torch.Tensor:
        return micro_mask.sum() * micro_batches


EQUIVALENCE_FAULTS: tuple[type[FaultHooks], ...] = (LossPerMicrobatch,)
