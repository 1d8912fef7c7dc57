"""The forward-observer hook of the consistency dump (default off).

Without ``--diagnostic-config`` the workloads use ``NullObserver``, whose context manager
does nothing, and the per-sample diagnostic forwards are never run: the training path is
untouched. With it, ``build_observer`` imports ``autotest.consistency.collect`` lazily and
calls its ``make_observer(config)``.

Calls a workload makes, only for the diagnostic window step:

- rollout side (``side="rollout"``, ``phase="prefill"``): one full-sequence forward of the
  rollout copy of the model, in the rollout dtype, over prompt + sampled response of one
  sample, after sampling;
- actor side (``side="actor"``, ``phase="recompute_logprob"``): the trainer's fp32 log-prob
  recompute before the update, one sample per forward (``micro_batch_size`` 1).

Both sides pass the same ``request_ids`` (``step{S}-p{P}-s{K}``) and ``token_ids``
(prompt + response, no padding), which is how samples are paired across sides.

For the three-way log-prob comparison, the same window also saves (``record_logprobs``) the
log-probs of every sampled token as three paths computed them: ``recorded`` (what the rollout
returned while sampling), ``recomputed`` (the rollout-side full-sequence forward above) and
``trainer`` (the actor's recompute).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

ROLLOUT_SIDE = "rollout"
ACTOR_SIDE = "actor"
ROLLOUT_PHASE = "prefill"
ACTOR_PHASE = "recompute_logprob"


@runtime_checkable
class ForwardObserver(Protocol):
    """Something that watches single forward passes of a model on either side."""

    def forward(
        self,
        side: str,
        step: int,
        phase: str,
        request_ids: list[str],
        token_ids: list[list[int]],
        weight_version: int,
        model: torch.nn.Module,
        held_weight_version: int | None = None,
    ) -> AbstractContextManager[Any]:
        """A context manager that wraps exactly one forward pass of ``model``; ``weight_version`` is the batch's,
        ``held_weight_version`` the version ``model`` holds (its last completed weight load)."""
        ...

    def record_logprobs(
        self,
        kind: str,
        step: int,
        samples: list[int],
        request_ids: list[str],
        positions: list[list[int]],
        token_ids: list[list[int]],
        logprobs: list[list[float]],
        dtype: str | None = None,
        position_ids: list[list[int]] | None = None,
        cache_lengths: list[list[int]] | None = None,
    ) -> None:
        """Save per-token log-probs of the window's samples as one path computed them (``kind``), by a model
        computing in ``dtype`` (fp32 | bf16); the sampler's records may carry the KV-cache path each token was
        scored through (``position_ids``, ``cache_lengths``: :mod:`autotest.consistency.logprob_records`)."""
        ...

    def close(self) -> None:
        """Flush and release whatever the observer holds; called once at the end of the run."""
        ...


class NullObserver:
    """The default: observes nothing."""

    def forward(
        self,
        side: str,
        step: int,
        phase: str,
        request_ids: list[str],
        token_ids: list[list[int]],
        weight_version: int,
        model: torch.nn.Module,
        held_weight_version: int | None = None,
    ) -> AbstractContextManager[Any]:
        """A context manager that does nothing."""
        return contextlib.nullcontext()

    def record_logprobs(
        self,
        kind: str,
        step: int,
        samples: list[int],
        request_ids: list[str],
        positions: list[list[int]],
        token_ids: list[list[int]],
        logprobs: list[list[float]],
        dtype: str | None = None,
        position_ids: list[list[int]] | None = None,
        cache_lengths: list[list[int]] | None = None,
    ) -> None:
        """Saves nothing."""

    def close(self) -> None:
        """Nothing to release."""


def build_observer(diagnostic: Mapping[str, Any] | None) -> ForwardObserver:
    """``NullObserver`` when ``diagnostic`` is None, else the consistency collector's observer."""
    if diagnostic is None:
        return NullObserver()
    from autotest.consistency.collect import make_observer

    return make_observer(dict(diagnostic))
