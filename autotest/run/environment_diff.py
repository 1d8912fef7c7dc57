"""What changed between the environment a golden was calibrated in and today's.

Both sides are :func:`autotest.run.preflight.environment_fingerprint` records (the baseline keeps its own under
``provenance.environment``), the framework's Python's packages under ``framework`` when the case names one.
Compared: the Python version, the architecture, every fingerprinted package, the framework Python's packages, the
GPU models, count, driver and CUDA. Not compared: the host name, interpreter paths, the kernel build and the CPU
count (they name the machine, not what trains), and the framework's own package (its version is the code under
test, not the environment).

Pure logic: two mappings in, one line per change out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_TOP = ("python", "machine")
_GPU = ("models", "count", "driver", "cuda")


def environment_changes(recorded: Mapping[str, Any] | None, today: Mapping[str, Any],
                        own_packages: Sequence[str] = ()) -> list[str]:
    """``name old -> new`` for each difference; [] when ``recorded`` is missing (nothing to compare against)."""
    if not isinstance(recorded, Mapping):
        return []
    changes = [_line(key, recorded.get(key), today.get(key)) for key in _TOP]
    changes += _packages("", recorded.get("packages"), today.get("packages"), own_packages)
    old_gpu, new_gpu = _mapping(recorded.get("gpu")), _mapping(today.get("gpu"))
    changes += [_line(f"gpu {key}", old_gpu.get(key), new_gpu.get(key)) for key in _GPU]
    old_fw, new_fw = _mapping(recorded.get("framework")), _mapping(today.get("framework"))
    if old_fw and new_fw:  # recorded on both sides: the framework Python's packages
        changes += _packages("framework ", old_fw.get("packages"), new_fw.get("packages"), own_packages)
    return [c for c in changes if c]


def _packages(prefix: str, old: Any, new: Any, own: Sequence[str]) -> list[str]:
    old, new = _mapping(old), _mapping(new)
    return [_line(f"{prefix}{name}", old.get(name), new.get(name)) for name in sorted(set(old) | set(new))
            if name not in own]


def _line(name: str, old: Any, new: Any) -> str:
    if old == new:
        return ""
    return f"{name} {_show(old)} -> {_show(new)}"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
