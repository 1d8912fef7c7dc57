"""Can a case run on this machine? GPUs, framework checkout and Python packages.

A case whose platform is absent is *skipped* with its reason ("needs 8 GPUs, found 0"). A case
whose platform is present but whose inputs are missing is not a skip: preflight fails it fast.

GPU count: ``RL_AUTOTEST_GPU_COUNT`` when set (tests, or machines where nvidia-smi lies), else
the ``GPU n:`` lines of ``nvidia-smi -L`` (MIG slices are not counted), capped by
``CUDA_VISIBLE_DEVICES`` when that is set, since the launched run sees only those.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.case import Case

GPU_COUNT_ENV = "RL_AUTOTEST_GPU_COUNT"
NVIDIA_SMI_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class GpuInfo:
    """What this machine offers; ``source`` says where the count came from."""

    count: int
    source: str
    names: tuple[str, ...] = ()
    driver: str | None = None
    cuda: str | None = None


@dataclass(frozen=True)
class PlatformCheck:
    """Runnable here, or the reasons it is not (each one line, joined in ``skip_reason``)."""

    case: str
    runnable: bool
    reasons: tuple[str, ...]
    gpus_needed: int
    gpus_found: int
    gpu_source: str
    framework_dir: str | None
    missing_packages: tuple[str, ...]

    @property
    def skip_reason(self) -> str | None:
        return "; ".join(self.reasons) if self.reasons else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"skip_reason": self.skip_reason}


def parse_nvidia_smi_list(text: str) -> tuple[str, ...]:
    """GPU names from ``nvidia-smi -L`` ("GPU 0: NVIDIA H200 (UUID: ...)"), MIG lines skipped."""
    return tuple(m.group(1).strip() for m in re.finditer(r"^GPU \d+: (.*?)(?: \(UUID: [^)]*\))?$",
                                                         text, flags=re.MULTILINE))


def parse_cuda_version(text: str) -> str | None:
    """The driver's CUDA version from the banner of plain ``nvidia-smi``."""
    match = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    return match.group(1) if match else None


def _run_smi(args: list[str], environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(stdout, why-not) of one nvidia-smi call; stdout None when it did not work."""
    exe = shutil.which("nvidia-smi", path=environ.get("PATH", os.defpath))
    if exe is None:
        return None, "nvidia-smi not found"
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, env=dict(environ),
                              timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S:g} s"
    if done.returncode != 0:
        first = (done.stdout + done.stderr).strip().splitlines()
        return None, f"nvidia-smi failed: {first[0] if first else f'exit code {done.returncode}'}"
    return done.stdout, "nvidia-smi"


def detect_gpus(environ: Mapping[str, str] | None = None, *, details: bool = False) -> GpuInfo:
    """Count this machine's GPUs; with ``details`` also the driver and CUDA version."""
    env = os.environ if environ is None else environ
    override = env.get(GPU_COUNT_ENV)
    if override is not None and override.strip() != "":
        if not override.strip().isdigit():
            raise UsageError(f"environment: {GPU_COUNT_ENV}: {override!r} is not a whole number; "
                             "set it to the number of GPUs or unset it")
        return GpuInfo(count=int(override), source=GPU_COUNT_ENV)
    listing, source = _run_smi(["-L"], env)
    if listing is None:
        return GpuInfo(count=0, source=source)
    names = parse_nvidia_smi_list(listing)
    count = len(names)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
        source += f", CUDA_VISIBLE_DEVICES={visible!r}"
    driver = cuda = None
    if details:
        query, _ = _run_smi(["--query-gpu=driver_version", "--format=csv,noheader"], env)
        driver = query.strip().splitlines()[0].strip() if query and query.strip() else None
        banner, _ = _run_smi([], env)
        cuda = parse_cuda_version(banner or "")
    return GpuInfo(count=count, source=source, names=names, driver=driver, cuda=cuda)


def framework_dir(case: Case, environ: Mapping[str, str] | None = None) -> tuple[Path | None, str | None]:
    """(checkout dir, reason it is unusable) for the case's framework; (None, None) if none."""
    fw = case.platform.framework
    if fw is None:
        return None, None
    env = os.environ if environ is None else environ
    value = env.get(fw.env, "")
    if not value:
        return None, f"{fw.env} is not set ({fw.name} checkout)"
    path = Path(value)
    if not path.is_dir():
        return None, f"{fw.env}={value} is not a directory ({fw.name} checkout)"
    return path.resolve(), None


def missing_packages(names: tuple[str, ...]) -> tuple[str, ...]:
    """Distributions not installed in this Python (looked up without importing them)."""
    missing = []
    for name in names:
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return tuple(missing)


def check_platform(case: Case, environ: Mapping[str, str] | None = None, *,
                   checkout_pending: bool = False) -> PlatformCheck:
    """Decide whether ``case`` can run here; every unmet requirement becomes one reason.

    ``checkout_pending``: the harness will check the framework out itself (autotest.run.framework), so
    an unset checkout variable is no reason to skip; a machine without the GPUs fetches nothing.
    """
    reasons = []
    needed = case.platform.gpus
    if needed > 0:
        gpus = detect_gpus(environ)
        if gpus.count < needed:
            reasons.append(f"needs {needed} GPUs, found {gpus.count} ({gpus.source})")
    else:
        gpus = GpuInfo(count=0, source="not needed")
    checkout, why = (None, None) if checkout_pending else framework_dir(case, environ)
    if why:
        reasons.append(why)
    absent = missing_packages(case.platform.python_packages)
    if absent:
        reasons.append(f"needs Python package{'s' if len(absent) > 1 else ''} "
                       f"{', '.join(absent)} (not installed)")
    return PlatformCheck(case=case.name, runnable=not reasons, reasons=tuple(reasons),
                         gpus_needed=needed, gpus_found=gpus.count, gpu_source=gpus.source,
                         framework_dir=str(checkout) if checkout else None,
                         missing_packages=absent)
