"""What a run cost, in device-seconds: wall time x the devices it held.

On a GPU node a run holds ``platform.gpus`` GPUs for its wall time; on CPU it holds the cores it was given
(the embedded workloads cap torch at one thread each, so one core unless ``RL_AUTOTEST_CORES`` or the case's
``OMP_NUM_THREADS`` says more). A verdict records ``context.cost`` in results.json; a replicate mean is the
sum of its replicates; calibration and bisect sum their runs. The history keeps ``device_seconds`` per run and
the nightly summary adds them up against the nightly's declared budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GPU, CPU = "gpu", "cpu"
CORES_ENV = "RL_AUTOTEST_CORES"


@dataclass(frozen=True)
class Cost:
    wall_s: float
    devices: float
    device: str

    @property
    def device_seconds(self) -> float:
        return round(self.wall_s * self.devices, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"device_seconds": self.device_seconds, "wall_s": round(self.wall_s, 1), "devices": self.devices,
                "device": self.device}


def cores_used(env: Mapping[str, str]) -> float:
    """Cores a CPU run holds: ``RL_AUTOTEST_CORES``, else ``OMP_NUM_THREADS``, else 1 (unreadable values: 1)."""
    for name in (CORES_ENV, "OMP_NUM_THREADS"):
        try:
            value = float(env.get(name, ""))
        except ValueError:
            continue
        if value > 0:
            return value
    return 1.0


def run_cost(gpus: int, wall_s: float | None, env: Mapping[str, str]) -> Cost:
    """One run's cost: wall x GPUs on a GPU case, wall x cores on CPU."""
    wall = max(0.0, float(wall_s or 0.0))
    if gpus > 0:
        return Cost(wall, float(gpus), GPU)
    return Cost(wall, cores_used(env), CPU)


def total_device_seconds(costs: Iterable[Mapping[str, Any] | None]) -> float:
    """The sum of recorded ``context.cost`` dicts (a run without one counts 0)."""
    return round(sum(float(c.get("device_seconds") or 0.0) for c in costs if isinstance(c, Mapping)), 1)


def summed(costs: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The cost of several runs (a replicate mean, a calibration, a bisect) as one ``context.cost`` dict."""
    kept = [c for c in costs if isinstance(c, Mapping)]
    return {"device_seconds": total_device_seconds(kept), "runs": len(kept),
            "wall_s": round(sum(float(c.get("wall_s") or 0.0) for c in kept), 1),
            "device": next((str(c.get("device")) for c in kept if c.get("device")), CPU)}


def format_device_seconds(seconds: float) -> str:
    """``1234.5`` -> ``1234.5 device-s (0.34 device-h)``."""
    return f"{seconds:.1f} device-s ({seconds / 3600:.2f} device-h)"
