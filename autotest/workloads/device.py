"""Where the embedded GRPO workload computes: CPU (the default), or a CUDA device for the GPU check.

``RL_AUTOTEST_WORKLOAD_DEVICE=cuda`` (or ``cuda:N``) makes the workload's process allocate every tensor on that
device (``torch.set_default_device``) and draw from generators on it; unset, empty or ``cpu`` changes nothing, so
the CPU runs stay bit for bit what the baselines were calibrated on. Read from the environment, like
``RL_AUTOTEST_AA_PERTURB``, so a case's ``launch.env`` sets it for every launch of a run (the resume phase and the
consistency job's re-run included). Local engines only: Ray actors start in processes of their own.
scripts/gpu_check.sh sets it; docs/gpu-runners.md ("GPU check") says what has run where.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from autotest.errors import UsageError

ENV = "RL_AUTOTEST_WORKLOAD_DEVICE"


def workload_device(environ: Mapping[str, str] | None = None) -> str:
    """``cpu`` or a CUDA device name; anything else is one line naming the variable."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip() or "cpu"
    if not re.fullmatch(r"cpu|cuda(:\d+)?", raw):
        raise UsageError(f"${ENV}={raw!r}: expected cpu, cuda or cuda:N")
    return raw


def use_device(device: str) -> None:
    """Allocate on ``device`` from here on (no-op for the CPU); refuse a CUDA device torch cannot reach."""
    if device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"${ENV}={device}: torch {torch.__version__} sees no CUDA device "
                         f"(CUDA build: {torch.version.cuda or 'none'})")
    torch.set_default_device(device)


def generator(seed: int) -> Any:
    """A torch generator seeded ``seed`` on the default device (the CPU unless :func:`use_device` moved it)."""
    import torch

    return torch.Generator(device=torch.get_default_device()).manual_seed(seed)
