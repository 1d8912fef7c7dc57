"""Faults that break the weight sync only now and then, or on one rank of several (issue 44 item 4): a percentile of
the per-step mismatch reads a clean step and passes them, so they are what the per-step ``breaches`` bound
(:mod:`autotest.scopes.breaches`) is for. Registered in :mod:`autotest.workloads.faults` beside the others.

| fault | effect | verdict | breached | triage |
|---|---|---|---|---|
| ``sync-skip-alternate`` | the weight sync after every odd step is skipped: each even step's rollout samples with weights one step stale | FAIL | k3 (breaches: every 2nd step) | mismatch |
| ``sync-skip-every[:N]`` | the sync after every Nth (5th) step is skipped: steps N+1, 2N+1, ... sample one step stale | FAIL | k3 (breaches: every Nth step) | mismatch |
| ``stale-rank[:N]`` | the rollout's batch is split over N (4) data-parallel ranks; the last rank's weight receive lags one sync behind at every step | FAIL | k3 (breaches: every step, diluted 1/N) | mismatch |

The embedded rollout engine is one process with one model. ``stale-rank`` emulates N data-parallel rollout ranks:
it cuts each step's batch into N equal contiguous shards, samples the first N-1 with the synced model and the last
with a copy holding the previous sync's weights, and joins the shards (the sampling stream is shared, so the rows a
clean run would draw differ in order of draws, not in law). Every step then carries one stale shard: the batch's
token-mean k3 is the stale shard's diluted about N times, at every step (no step period; the log has no per-rank
metric, so the verdict says "every step", and the rank is for the consistency dump to pin).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING

from autotest.errors import UsageError
from autotest.workloads.fault_hooks import INCONSISTENCY, MISMATCH, FaultHooks

if TYPE_CHECKING:
    import torch


class SyncSkipEvery(FaultHooks):
    """The weight sync after every Nth training step is skipped (a sync issued only when a counter is off by one,
    or an async sync dropped when the previous one is still in flight): the rollout of the next step samples with
    weights one step stale, while the engine reports the new weight version. Every other step is clean."""

    name = "sync-skip-every"
    arg_help = "N, the sync after every Nth step is skipped (default 5)"
    default_arg = "5"
    # written before the run: the stale steps' k3 is a one-step-stale rollout's (1e-5..1e-2 on tiny-grpo), the
    # others' the clean 1e-14; the median of the per-step errors reads a clean step
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY, "period": 5,
                "measured": "seed 0, N 5: steps 6, 11, ..., 41 breach (k3 1.1e-2 at step 6, worst 2.3e-2 at 26), the "
                "others <= 1.5e-14; p50 gate PASS (3.4e-15), stepwise 5e-3 gate 5/45 steps, breaches 8/45, every 5th"}

    def period(self) -> int:
        value = self.int_arg()
        if value < 2:
            raise UsageError(f"--fault {self.name}: N must be 2 or more (1 skips every sync; use unsynced-layer)")
        return value

    def magnitude(self) -> float:
        return float(self.period())

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        if version and version % self.period() == 0:
            return {}  # nothing copied: the rollout keeps the weights of the sync before
        return state_dict


class SyncSkipAlternate(SyncSkipEvery):
    """The weight sync after every odd training step is skipped: every even step's rollout samples with the
    weights of the step before last (the issue's fault: k3 1.5e-5 to 2.4e-2 on the even steps, 1e-14 on the odd
    ones, a median of 1e-14)."""

    name = "sync-skip-alternate"
    arg_help = ""
    default_arg = None
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY, "period": 2,
                "measured": "seed 0: k3 4.0e-5..5.7e-2 on the 22 even steps, <= 1.2e-14 on the odd ones; p50 gate "
                "PASS (1.1e-14), stepwise 5e-3 gate 11/45 steps, breaches 22/45, every 2nd"}

    def period(self) -> int:
        return 2

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        return {} if version % 2 == 1 else state_dict  # version k follows step k: odd syncs are dropped


class StaleRank(FaultHooks):
    """One of N data-parallel rollout ranks receives each weight sync one step late (its receive is posted after the
    broadcast it should take part in): its shard of every batch is sampled with the previous sync's weights. See the
    module doc for how one process emulates the ranks."""

    name = "stale-rank"
    arg_help = "N, the rollout's data-parallel ranks; the last lags one sync behind (default 4)"
    default_arg = "4"
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "measured": "seed 0, N 4: k3 8.7e-15 at step 1 (the initial sync reached every rank), then 4.9e-3, "
                "3.6e-3, 1.1e-3 at steps 2-4"}

    def __init__(self, arg: str | None, seed: int) -> None:
        super().__init__(arg, seed)
        self.previous: dict[str, torch.Tensor] | None = None
        self.current: dict[str, torch.Tensor] | None = None
        self.stale: torch.nn.Module | None = None

    def ranks(self) -> int:
        value = self.int_arg()
        if value < 2:
            raise UsageError(f"--fault {self.name}: N must be 2 or more ranks (got {value})")
        return value

    def magnitude(self) -> float:
        return float(self.ranks())

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        self.previous = self.current
        self.current = {k: v.detach().clone() for k, v in state_dict.items()}
        return state_dict

    def rollout_ranks(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        import torch

        n = self.ranks()
        if self.previous is None:  # the initial sync reached every rank
            return [model] * n
        if self.stale is None:
            self.stale = copy.deepcopy(model)
        if hasattr(self.stale, "load_weights"):  # the engine layout converts the trainer's names itself
            self.stale.load_weights(self.previous.items())
        else:
            params = dict(self.stale.named_parameters())
            with torch.no_grad():
                for name, tensor in self.previous.items():
                    params[name].copy_(tensor)
        return [model] * (n - 1) + [self.stale]


INTERMITTENT_FAULTS: tuple[type[FaultHooks], ...] = (SyncSkipAlternate, SyncSkipEvery, StaleRank)
