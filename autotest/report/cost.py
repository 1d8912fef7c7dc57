"""What a run cost, in device-seconds, and which quantity that is (``Cost.quantity``).

- GPU case: GPU-seconds, wall time x ``platform.gpus`` (the GPUs are held for the whole run, busy or not).
- CPU case: CPU-seconds, the CPU time the run's process tree got, as the contention sampler measured it
  (``/proc/<pid>/task/*/schedstat`` of the launched process and its descendants, sampled every
  ``SAMPLE_INTERVAL_S``; a child that lives less than one interval is missed). Where the tree was not measured
  (a Ray job on a cluster, no ``/proc``) it is core-seconds: wall x the cores the run was given (the embedded
  workloads cap torch at one thread each, so one core unless ``RL_AUTOTEST_CORES`` or ``OMP_NUM_THREADS`` says
  more).

A verdict records ``context.cost`` in results.json; a replicate mean is the sum of its replicates; calibration and
bisect sum their runs. The history keeps ``device_seconds`` per run and the nightly summary adds them up against
the nightly's declared budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GPU, CPU = "gpu", "cpu"
CORES_ENV = "RL_AUTOTEST_CORES"


#: ``Cost.basis``: GPU-seconds (wall x GPUs), CPU-seconds (measured CPU time), core-seconds (wall x cores held)
GPU_SECONDS, CPU_SECONDS, CORE_SECONDS = "gpu-seconds", "cpu-seconds", "core-seconds"


@dataclass(frozen=True)
class Cost:
    wall_s: float
    devices: float
    device: str
    #: CPU time of the run's process tree (CPU cases where the sampler measured it); None: not measured
    cpu_s: float | None = None

    @property
    def basis(self) -> str:
        if self.device == GPU:
            return GPU_SECONDS
        return CPU_SECONDS if self.cpu_s is not None else CORE_SECONDS

    @property
    def device_seconds(self) -> float:
        if self.basis == CPU_SECONDS:  # a mostly idle CPU run uses hundredths of a second: kept, not rounded to 0
            return round(float(self.cpu_s or 0.0), 3)
        return round(self.wall_s * self.devices, 1)

    @property
    def quantity(self) -> str:
        """Which quantity ``device_seconds`` is, in words (results.json, report.md and the docs say the same)."""
        if self.basis == GPU_SECONDS:
            return f"GPU-seconds: wall {self.wall_s:.1f} s x {self.devices:g} GPUs"
        if self.basis == CPU_SECONDS:
            return f"CPU-seconds: CPU time of the run's process tree, measured over a wall of {self.wall_s:.1f} s"
        return (f"core-seconds: wall {self.wall_s:.1f} s x {self.devices:g} cores held "
                "(the run's CPU time was not measured)")

    def to_dict(self) -> dict[str, Any]:
        data = {"device_seconds": self.device_seconds, "wall_s": round(self.wall_s, 1), "devices": self.devices,
                "device": self.device, "basis": self.basis, "quantity": self.quantity}
        if self.cpu_s is not None:
            data["cpu_s"] = round(self.cpu_s, 3)
        return data


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


def run_cost(gpus: int, wall_s: float | None, env: Mapping[str, str], cpu_s: float | None = None) -> Cost:
    """One run's cost: wall x GPUs on a GPU case; on CPU the measured ``cpu_s`` of its process tree, else wall x
    cores held."""
    wall = max(0.0, float(wall_s or 0.0))
    if gpus > 0:
        return Cost(wall, float(gpus), GPU)
    return Cost(wall, cores_used(env), CPU, None if cpu_s is None else max(0.0, float(cpu_s)))


def total_device_seconds(costs: Iterable[Mapping[str, Any] | None]) -> float:
    """The sum of recorded ``context.cost`` dicts (a run without one counts 0)."""
    return round(sum(float(c.get("device_seconds") or 0.0) for c in costs if isinstance(c, Mapping)), 1)


def summed(costs: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The cost of several runs (a replicate mean, a calibration, a bisect) as one ``context.cost`` dict."""
    kept = [c for c in costs if isinstance(c, Mapping)]
    bases = sorted({str(c["basis"]) for c in kept if c.get("basis")})
    data = {"device_seconds": total_device_seconds(kept), "runs": len(kept),
            "wall_s": round(sum(float(c.get("wall_s") or 0.0) for c in kept), 1),
            "device": next((str(c.get("device")) for c in kept if c.get("device")), CPU)}
    if bases:
        data["basis"] = bases[0] if len(bases) == 1 else " + ".join(bases)
        data["quantity"] = f"{data['basis']} summed over {len(kept)} run(s)"
    return data


def format_device_seconds(seconds: float) -> str:
    """``1234.5`` -> ``1234.5 device-s (0.34 device-h)``."""
    return f"{seconds:.1f} device-s ({seconds / 3600:.2f} device-h)"
