"""The harness-made A/A nudge for a trainer nobody here wrote (stdlib-only until torch loads its optimizers).

An A/A pair is the same code twice on one seed. On CPU a trainer is usually bitwise deterministic, so the pair
would agree exactly; the embedded workloads read ``RL_AUTOTEST_AA_PERTURB``, a user's trainer does not. With
``RL_AUTOTEST_AA_NUDGE=N`` (N >= 1) and this folder first on ``PYTHONPATH``, an import hook waits for
``torch.optim.optimizer`` and registers a global optimizer-step pre-hook (``register_optimizer_step_pre_hook``,
public since torch 2.0). At the process's first optimizer step, after the first gradients and before the update,
it moves 10% of every trained parameter's elements one ulp towards +inf, the elements drawn from a generator
seeded N alone: the run's own random streams (init, data order, sampling) are untouched, so the pair shares them
and parts the way two GPU runs do. A trainer whose optimizer is not a ``torch.optim.Optimizer`` is not nudged;
the A/A calibration then finds the pair bitwise equal and says so. One line on stderr says what moved.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

ENV = "RL_AUTOTEST_AA_NUDGE"
FRACTION = 0.1
_TARGET = "torch.optim.optimizer"


def install() -> None:
    """Register the hook now if torch's optimizers are loaded, else when they are."""
    if _TARGET in sys.modules:
        _register(sys.modules[_TARGET])
    else:
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _register(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _register(module) -> None:
    n = int(os.environ[ENV])
    done = []

    def nudge_first_step(optimizer, args, kwargs):
        if done:
            return None
        done.append(True)
        import torch

        generator = torch.Generator().manual_seed(n)
        moved = 0
        with torch.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not param.is_floating_point():
                        continue
                    chosen = (torch.rand(param.shape, generator=generator) < FRACTION).to(param.device)
                    param.copy_(torch.where(chosen, torch.nextafter(param, torch.full_like(param, float("inf"))),
                                            param))
                    moved += int(chosen.sum())
        print(f"rl-autotest A/A nudge {n} ({ENV}): {moved} parameter elements moved one ulp before the first "
              f"optimizer step", file=sys.stderr, flush=True)
        return None

    module.register_optimizer_step_pre_hook(nudge_first_step)
