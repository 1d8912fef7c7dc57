"""The case's GPUs for the contention record: nvidia-smi's view of them and a GPU speed probe.

Read by :mod:`autotest.run.contention` before and after a run; None / an ``error`` entry on a CPU runner or where
nvidia-smi or CUDA do not answer, never an invented figure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

NVIDIA_SMI_TIMEOUT_S = 10.0
GPU_PROBE_TIMEOUT_S = 120.0
#: throttle reasons that slow a GPU below what the node gives when it is healthy (nvidia-smi bit mask): HW slowdown,
#: SW thermal, HW thermal, HW power brake; the SW power cap and idle bits are ordinary under load
SLOWING_THROTTLE_BITS = {0x8: "hw_slowdown", 0x40: "sw_thermal", 0x80: "hw_thermal", 0x100: "hw_power_brake"}


def _smi(args: list[str], environ: Mapping[str, str]) -> str | None:
    exe = shutil.which("nvidia-smi", path=environ.get("PATH", os.defpath))
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_gpu_rows(text: str) -> list[dict[str, Any]]:
    """Rows of ``--query-gpu=index,uuid,clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,utilization.gpu,
    memory.used`` (csv, noheader, nounits)."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 7 or not parts[0].isdigit():
            continue
        try:
            reasons = int(parts[4], 16) if parts[4].lower().startswith("0x") else int(parts[4])
        except ValueError:
            reasons = 0
        rows.append({"index": int(parts[0]), "uuid": parts[1], "sm_clock_mhz": _number(parts[2]),
                     "sm_clock_max_mhz": _number(parts[3]), "utilization_pct": _number(parts[5]),
                     "memory_used_mib": _number(parts[6]),
                     "slowing_throttle_reasons": [name for bit, name in SLOWING_THROTTLE_BITS.items()
                                                  if reasons & bit]})
    return rows


def parse_compute_apps(text: str) -> list[dict[str, Any]]:
    """Rows of ``--query-compute-apps=gpu_uuid,pid,used_memory`` (csv, noheader, nounits)."""
    apps = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[1].isdigit():
            apps.append({"gpu_uuid": parts[0], "pid": int(parts[1]), "memory_mib": _number(parts[2])})
    return apps


def visible_gpu_indices(environ: Mapping[str, str]) -> list[int] | None:
    """The case's GPUs by index from CUDA_VISIBLE_DEVICES (None: every GPU; UUIDs are matched by the caller)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return None
    return [int(v) for v in visible.split(",") if v.strip().isdigit()]


def gpu_state(environ: Mapping[str, str], ours: set[int]) -> dict[str, Any] | None:
    """The case's GPUs: clocks, throttle reasons, and the processes on them that are not the run's; None without
    nvidia-smi (a CPU runner)."""
    text = _smi(["--query-gpu=index,uuid,clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,utilization.gpu,"
                 "memory.used", "--format=csv,noheader,nounits"], environ)
    if text is None:
        return None
    gpus = parse_gpu_rows(text)
    wanted = visible_gpu_indices(environ)
    visible = environ.get("CUDA_VISIBLE_DEVICES", "")
    gpus = [g for g in gpus if wanted is None or g["index"] in wanted or g["uuid"] in visible]
    uuids = {g["uuid"] for g in gpus}
    apps = parse_compute_apps(_smi(["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"],
                                   environ) or "")
    others = [a for a in apps if a["gpu_uuid"] in uuids and a["pid"] not in ours]
    return {"gpus": gpus, "other_processes": others}


_GPU_PROBE = """
import json, time, torch
if not torch.cuda.is_available():
    print(json.dumps({"error": "torch sees no CUDA device"})); raise SystemExit
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
for _ in range(3): a @ a
torch.cuda.synchronize()
best = None
for _ in range(3):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20): a @ a
    end.record(); torch.cuda.synchronize()
    best = min(best or 1e9, start.elapsed_time(end) / 1000)
print(json.dumps({"wall_s": round(best, 5)}))
"""


def gpu_probe(environ: Mapping[str, str]) -> dict[str, Any]:
    """A fixed fp16 matmul timed on the case's first GPU, in a process of its own (no CUDA context stays here)."""
    base = {"device": "gpu", "kernel": "20 x fp16 matmul 4096^3 (torch, CUDA events)"}
    try:
        done = subprocess.run([sys.executable, "-c", _GPU_PROBE], capture_output=True, text=True,
                              timeout=GPU_PROBE_TIMEOUT_S, env=dict(environ), check=False)
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return {**base, "error": f"probe did not run: {exc}"}
    if "wall_s" not in answer:
        why = answer.get("error") or (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return {**base, "error": why}
    return {**base, "wall_s": answer["wall_s"], "cpu_s": None}
