"""A/A perturbation: make two runs of the same seed diverge the way two real GPU runs do.

The CPU workloads are bitwise deterministic, so an A/A pair (the same code twice on the same seed) would agree
exactly and calibrate a paired threshold of zero. ``RL_AUTOTEST_AA_PERTURB=N`` (N >= 1; unset or ``0``: off)
nudges a fraction of the initial student weights by one ulp towards +inf, the elements chosen by a generator
seeded with N alone, so the run's own random streams (init, prompts, sampling, mini-batches) are untouched: the
pair shares data order and initialisation to rounding, and its trajectories drift apart as GPU non-determinism
makes them. Two runs with the same N are bitwise equal; N = 1 and N = 2 are an A/A pair.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from autotest.errors import UsageError

if TYPE_CHECKING:
    import torch

ENV = "RL_AUTOTEST_AA_PERTURB"
FRACTION = 0.1
"""Share of each parameter's elements that move one ulp (enough that the first sampled tokens to differ come
within a few steps; see docs/workloads.md for the measured divergence)."""


def perturbation_from_env(environ: Mapping[str, str] | None = None) -> int:
    """N from ``RL_AUTOTEST_AA_PERTURB`` (0 when unset, empty or ``0``); a bad value raises ``UsageError``."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if raw in ("", "0"):
        return 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 1:
        raise UsageError(f"{ENV}: must be a non-negative integer (0 or unset: off; N >= 1: perturbation N), "
                         f"got {raw!r}")
    return value


def describe(n: int) -> str:
    """The run-log line of an active perturbation."""
    return (f"A/A perturbation {n} on ({ENV}): {FRACTION:.0%} of the initial weights moved one ulp "
            f"(elements drawn from a generator seeded {n})")


def nudge_weights(model: torch.nn.Module, n: int, fraction: float = FRACTION) -> int:
    """Move a ``fraction`` of every parameter's elements one ulp towards +inf, chosen by a generator seeded ``n``;
    returns how many elements moved. Parameters are visited by name so the choice does not depend on module order."""
    import torch

    generator = torch.Generator().manual_seed(n)
    moved = 0
    with torch.no_grad():
        for _, param in sorted(model.named_parameters(), key=lambda item: item[0]):
            chosen = torch.rand(param.shape, generator=generator) < fraction
            param.copy_(torch.where(chosen, torch.nextafter(param, torch.full_like(param, float("inf"))), param))
            moved += int(chosen.sum())
    return moved
